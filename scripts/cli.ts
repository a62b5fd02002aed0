/** Operator CLI in a checkout: `npm run cli -- <command> …` (the commands: scripts/cli-commands.ts; compiled: `switchboard <command>`). */
import { runCli } from './cli-commands.js';

process.exitCode = await runCli(process.argv.slice(2), 'npm run cli --');
