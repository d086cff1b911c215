// Types of esbuild.browser.mjs, for the specs that build page bundles.
import type { BuildOptions, Metafile, Plugin } from 'esbuild';

export declare const NODE_ONLY_PACKAGES: readonly string[];
export declare const browserTwins: Plugin;
export declare function nodeOnlyImports(metafile: Metafile): string[];
export declare function checkBrowserBundle(metafile: Metafile, what: string): void;
export declare function buildForBrowser(options: BuildOptions & { outdir: string }): Promise<Metafile>;
export declare function buildBrowserExample(outdir: string): Promise<Metafile>;
