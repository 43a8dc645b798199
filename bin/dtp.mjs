#!/usr/bin/env node
// Installed command `dtp`: runs the client CLI (scripts/client.sh in a checkout).
import '../dist/src/cli/client-main.js';
