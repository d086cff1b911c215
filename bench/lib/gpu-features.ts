/**
 * What the adapter would expose under Dawn toggles the backend does not turn on by default, for bench:gpu's
 * header (issue 36): `shader-f16` as it is and with `vulkan_enable_f16_on_nvidia` (Dawn blocks f16 on NVIDIA
 * drivers below 615.71), and the experimental subgroup-matrix feature with `allow_unsafe_apis`. Only adapters are
 * requested (no device), on the first path that gives one, as the backend's own acquisition does.
 */
interface DawnModule {
  create(options: string[]): GPU;
}

const WATCHED = ['shader-f16', 'subgroups', 'chromium-experimental-subgroup-matrix', 'timestamp-query'];

export async function probeFeatures(): Promise<string[]> {
  let dawn: DawnModule;
  try {
    dawn = (await import('webgpu')) as DawnModule;
  } catch (e) {
    return [`feature probe: npm "webgpu" did not load (${e instanceof Error ? e.message : String(e)})`];
  }
  const probes: [string, string[]][] = [
    ['as is', []],
    ['with vulkan_enable_f16_on_nvidia', ['enable-dawn-features=vulkan_enable_f16_on_nvidia']],
    ['with allow_unsafe_apis', ['enable-dawn-features=allow_unsafe_apis']],
  ];
  const lines: string[] = [];
  for (const [label, flags] of probes) {
    let found = 'no adapter';
    for (const [path, extra, request] of [
      ['native', [], {}],
      ['opengles', ['backend=opengles'], { featureLevel: 'compatibility' }],
    ] as const) {
      const adapter = await dawn.create([...extra, ...flags]).requestAdapter(request);
      if (!adapter) continue;
      const has = WATCHED.filter((f) => adapter.features.has(f));
      found = `${path}: ${has.length > 0 ? has.join(', ') : `none of ${WATCHED.join(', ')}`}`;
      break;
    }
    lines.push(`features ${label}: ${found}`);
  }
  return lines;
}
