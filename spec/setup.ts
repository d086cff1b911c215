// Specs import modules directly, not through the package entry: install the default backend as the entry does.
import '../src/backends/registry.js';
