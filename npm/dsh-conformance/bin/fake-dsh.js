#!/usr/bin/env node
// Runs the native fake-dsh of this platform (see ../lib/index.js).
"use strict";
require("../lib/index.js").run("fake-dsh");
