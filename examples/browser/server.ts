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

/** Serve the files under `dir` on 127.0.0.1 (`port` 0: any free port). Paths outside `dir` are refused. */
export function serveStatic(dir: string, port = 0): Promise<Served> {
  const root = normalize(dir + sep);
  const server = createServer((req, res) => {
    const path = decodeURIComponent(new URL(req.url ?? '/', 'http://127.0.0.1').pathname);
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
