#!/usr/bin/env node
// Runs the native dsh-conformance of this platform (see ../lib/index.js).
"use strict";
require("../lib/index.js").run("dsh-conformance");
