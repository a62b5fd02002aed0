/**
 * Opening a listener so that its failure stops the process with words an operator can act on.
 * Express 5's `app.listen` hands a listen error to its callback, where it looked like success
 * (the process ran on without its port); here EADDRINUSE and EACCES are a StartupError naming the
 * port and what to do.
 */
import type { Server } from 'node:http';
import { StartupError } from './core.js';

/** Listens on `port` (0: any free port) and resolves with the port taken. */
export function listen(server: Server, port: number, host: string, what: string): Promise<number> {
  return new Promise<number>((resolve, reject) => {
    const onError = (err: NodeJS.ErrnoException) => {
      server.off('listening', onListening);
      reject(listenError(err, port, what));
    };
    const onListening = () => {
      server.off('error', onError);
      const address = server.address();
      resolve(typeof address === 'object' && address ? address.port : port);
    };
    server.once('error', onError);
    server.once('listening', onListening);
    server.listen(port, host);
  });
}

export function listenError(err: NodeJS.ErrnoException, port: number, what: string): StartupError {
  switch (err.code) {
    case 'EADDRINUSE':
      return new StartupError(`${what}: port ${port} is already in use (another switchboard process or another program listens on it); stop that process or choose another port`);
    case 'EACCES':
      return new StartupError(`${what}: not allowed to listen on port ${port} (ports below 1024 need privileges this user does not have); choose a port above 1023`);
    case 'EADDRNOTAVAIL':
      return new StartupError(`${what}: cannot listen on port ${port}: the address is not available on this machine`);
    default:
      return new StartupError(`${what}: cannot listen on port ${port}: ${err.message}`);
  }
}
