// Copies the non-TypeScript files the compiled service needs (SQL migrations) into the build's
// output directory (`dist`, or the one given: the deploy test builds into a directory of its own).
// The output's migrations end up exactly the source's: files are copied first, then any file the
// source no longer has (removed, renamed, or from a later commit built before a checkout of an
// earlier one) is deleted, since `migrate` would apply it. The directory is never missing on the
// way, for a process reading it meanwhile.
import { cpSync, existsSync, mkdirSync, readdirSync, rmSync } from 'node:fs';
import path from 'node:path';
const out = process.argv[2] ?? 'dist';
const source = path.resolve('shared/db/migrations');
const target = path.resolve(out, 'shared/db/migrations');
if (target === source) {
  throw new Error(`copy-assets: the output ${out} is the source tree; give the build's output directory`);
}
mkdirSync(target, { recursive: true });
cpSync(source, target, { recursive: true });
for (const name of readdirSync(target)) {
  if (!existsSync(path.join(source, name))) rmSync(path.join(target, name), { recursive: true, force: true });
}
