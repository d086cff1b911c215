/** A tiny static file server for the page (Node's http module, nothing else), bound to 127.0.0.1 only. */
import { createServer, type Server } from 'node:http';
import { readFile } from 'node:fs/promises';
import { extname, join, normalize, sep } from 'node:path';

const TYPES: Readonly<Record<string, string>> = {
  '.html': 'text/html; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.map': 'application/json',
  '.css': 'text/css',
  '.png': 'image/png',
};

export interface Served {
  readonly url: string;
  readonly server: Server;
  close(): Promise<void>;
}

/**
 * Cross-origin isolation (COOP + COEP): a page needs it for SharedArrayBuffer, so that the CPU backend can share its
 * WebAssembly memory with worker threads. Everything the page loads comes from this server, so nothing breaks.
 */
const ISOLATION = { 'cross-origin-opener-policy': 'same-origin', 'cross-origin-embedder-policy': 'require-corp' };
/** Paths under this prefix are served without the isolation headers (a page as most hosts serve it). */
export const PLAIN_PREFIX = '/plain/';

/**
 * Serve the files under `dir` on 127.0.0.1 (`port` 0: any free port), cross-origin isolated except under
 * `PLAIN_PREFIX`. Paths outside `dir` are refused.
 */
export function serveStatic(dir: string, port = 0): Promise<Served> {
  const root = normalize(dir + sep);
  const server = createServer((req, res) => {
    const asked = decodeURIComponent(new URL(req.url ?? '/', 'http://127.0.0.1').pathname);
    const plain = asked.startsWith(PLAIN_PREFIX);
    const path = plain ? asked.slice(PLAIN_PREFIX.length - 1) : asked;
    const file = normalize(join(root, path.endsWith('/') ? `${path}index.html` : path));
    if (!file.startsWith(root)) {
      res.writeHead(403).end();
      return;
    }
    readFile(file).then(
      (body) =>
        res
          .writeHead(200, {
            'content-type': TYPES[extname(file)] ?? 'application/octet-stream',
            'cache-control': 'no-store',
            ...(plain ? {} : ISOLATION),
          })
          .end(body),
      () => res.writeHead(404, { 'content-type': 'text/plain' }).end(`not found: ${path}`),
    );
  });
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, '127.0.0.1', () => {
      const address = server.address();
      const bound = typeof address === 'object' && address ? address.port : port;
      resolve({
        url: `http://127.0.0.1:${bound}/`,
        server,
        close: () => new Promise((done) => server.close(() => done())),
      });
    });
  });
}
