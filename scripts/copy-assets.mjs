// Copies the non-TypeScript files the compiled service needs (SQL migrations) into the build's
// output directory (`dist`, or the one given: the deploy test builds into a directory of its own).
// The migrations directory is replaced, not merged: a file removed or renamed in the source (or
// one of a later commit, built before a checkout of an earlier one) must not stay behind, where
// `migrate` would apply it.
import { cpSync, mkdirSync, rmSync } from 'node:fs';
import path from 'node:path';
const out = process.argv[2] ?? 'dist';
const migrations = path.join(out, 'shared/db/migrations');
rmSync(migrations, { recursive: true, force: true });
mkdirSync(migrations, { recursive: true });
cpSync('shared/db/migrations', migrations, { recursive: true });
