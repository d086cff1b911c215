// Specs import modules directly, not through the package entry: install the default backend as the entry does.
import '../src/backends/registry.js';

// The CLIs the specs run count the lines they print: the note an unsupported Node gets (Node 20) is silenced for
// them, as a user can silence it; spec/robustness/runtime-support.spec.ts checks the note itself.
process.env.RLVR_NO_RUNTIME_NOTE = '1';
