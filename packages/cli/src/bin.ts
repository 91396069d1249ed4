#!/usr/bin/env node
import * as NodeRuntime from "@effect/platform-node/NodeRuntime"
import { runCli } from "./cli.js"

NodeRuntime.runMain(runCli(process.argv), { disableErrorReporting: true })
