/** WGSL sources are imported as text (esbuild's text loader, vitest's ?raw-free plugin in vitest.config). */
declare module '*.wgsl' {
  const source: string;
  export default source;
}
