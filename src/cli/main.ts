#!/usr/bin/env node
/** The command-line entry point (`rlvr`). Subcommands are added by the trainer; `info` lists what is available. */
import { parseArgs } from 'node:util';

const USAGE = `usage: rlvr <command> [options]

commands:
  info        print the version and the backends this machine offers
  help        this text`;

async function main(argv: string[]): Promise<number> {
  const { positionals } = parseArgs({ args: argv, allowPositionals: true, strict: false });
  const command = positionals[0] ?? 'help';
  switch (command) {
    case 'info': {
      console.log('rlvr-wgpu: backends: cpu');
      return 0;
    }
    case 'help':
      console.log(USAGE);
      return 0;
    default:
      console.error(`rlvr: unknown command '${command}'\n${USAGE}`);
      return 2;
  }
}

process.exitCode = await main(process.argv.slice(2));
