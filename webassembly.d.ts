/**
 * The part of the WebAssembly JavaScript API the CPU backend uses (src/backends/cpu/runtime.ts). TypeScript declares
 * it only in its DOM library, which the Node code does not load.
 */
declare namespace WebAssembly {
  // biome-ignore lint/suspicious/noEmptyInterface: an opaque handle (a declaration merged with other libraries')
  interface Module {}
  interface ModuleExportDescriptor {
    readonly name: string;
    readonly kind: 'function' | 'global' | 'memory' | 'table' | 'tag';
  }
  var Module: {
    prototype: Module;
    new (bytes: Uint8Array): Module;
    exports(module: Module): ModuleExportDescriptor[];
  };
  interface MemoryDescriptor {
    initial: number;
    maximum?: number;
    shared?: boolean;
  }
  interface Memory {
    readonly buffer: ArrayBuffer | SharedArrayBuffer;
    grow(delta: number): number;
  }
  var Memory: { prototype: Memory; new (descriptor: MemoryDescriptor): Memory };
  interface Instance {
    readonly exports: Record<string, unknown>;
  }
  var Instance: {
    prototype: Instance;
    new (module: Module, imports?: Record<string, Record<string, unknown>>): Instance;
  };
  /** Whether these bytes are a module this runtime can compile (its features included). */
  function validate(bytes: Uint8Array): boolean;
}
