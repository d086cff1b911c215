/** WGSL sources are imported as text (esbuild's text loader, vitest's ?raw-free plugin in vitest.config). */
declare module '*.wgsl' {
  const source: string;
  export default source;
}

/** The CPU backend's WebAssembly kernels, compiled from src/backends/cpu/assembly/ by the build (esbuild.wasm.mjs). */
declare module '*/assembly/kernels.wasm' {
  const base64: string;
  export default base64;
}
declare module '*/assembly/kernels-unshared.wasm' {
  const base64: string;
  export default base64;
}
declare module '*/assembly/kernels-fma.wasm' {
  const base64: string;
  export default base64;
}
declare module '*/assembly/kernels-fma-unshared.wasm' {
  const base64: string;
  export default base64;
}
declare module '*/assembly/kernels-memory64.wasm' {
  const base64: string;
  export default base64;
}
declare module '*/assembly/kernels-fma-memory64.wasm' {
  const base64: string;
  export default base64;
}
