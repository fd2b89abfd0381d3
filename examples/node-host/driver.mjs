#!/usr/bin/env node
/** @file Entry point of the Node.js example host's dsh-conformance driver: `node driver.mjs`. */

import { main } from "./src/driver.mjs";

main();
