#!/usr/bin/env node
// Runs the native dsh-host-driver of this platform (see ../lib/index.js).
"use strict";
require("../lib/index.js").run("dsh-host-driver");
