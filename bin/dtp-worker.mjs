#!/usr/bin/env node
// Installed command `dtp-worker`: runs a worker (scripts/worker.sh in a checkout).
import '../dist/src/cli/worker-main.js';
