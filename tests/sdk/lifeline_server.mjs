// Starts `lifeline serve --port 0 ...` for an SDK test and finds its port in the listening
// line; stops it with SIGTERM (the graceful drain) and waits for its exit.
import { spawn } from 'node:child_process';
import { once } from 'node:events';

export async function startLifeline(binary, args) {
  const server = spawn(binary, ['serve', '--port', '0', ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  server.stderr.on('data', () => {});
  const port = await new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`no listening line in: ${out}`)), 30000);
    server.stdout.on('data', (chunk) => {
      out += chunk;
      const m = out.match(/listening on http:\/\/127\.0\.0\.1:(\d+)/);
      if (m) {
        clearTimeout(timer);
        resolve(Number(m[1]));
      }
    });
    server.on('exit', (code) => reject(new Error(`server exited ${code}: ${out}`)));
  });
  return { server, port };
}

export async function stopLifeline(server) {
  if (server && server.exitCode === null) {
    server.kill('SIGTERM');
    await once(server, 'exit');
  }
}
