#!/usr/bin/env node
// Installed command `dtp-worker`: runs a worker (scripts/worker.sh in a checkout).
// Usage and errors name it `dtp-worker`; the variable is read once and removed.
process.env.DTP_PROGRAM_NAME = 'dtp-worker';
await import('../dist/src/cli/worker-main.js');
