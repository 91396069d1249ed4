// One process of the fleet bench (started by fleet.bench.mjs with
// `child_process.fork`): it warms up (the same drain over a small backlog
// of its own that the parent seeded under `warmPrefix`, so the timed drain
// runs compiled code, as a long-running fleet's does), opens its own store (or
// the raw reference) on the bench's database, says `ready`, drains when
// told `go` with its runners (support/due-drain.mjs), and answers its tally
// with its peak RSS and CPU, then closes and exits.
//
//   parent → { type: "open", url, tablePrefix, side: "store" | "raw", way, runners, limit, name, maxConnections, warm, warmPrefix }
//   child  → { type: "ready" }
//   parent → { type: "go" }
//   child  → { type: "done", tally, peakRssBytes, cpuMicros } or { type: "failed", error }
import { openConnectorStore, tableNames } from "@connector-store/sql-adapter"
import { drain } from "./due-drain.mjs"
import { rawPgDueDrain } from "./due-drain-raw-steps.mjs"
import { winnerOf } from "./operation-lifecycle.mjs"

let setup
let steps

const fail = (error) => {
  process.send({ type: "failed", error: error instanceof Error ? error.stack ?? error.message : String(error) }, () => process.exit(1))
}

/** The side's steps on the tables under `tablePrefix` (migrated already). */
const openSide = async ({ side, url, maxConnections }, tablePrefix) => {
  if (side === "store") return openConnectorStore({ url, tablePrefix, maxConnections, readWinner: winnerOf })
  const names = tableNames(tablePrefix)
  return rawPgDueDrain(url, { operation: names.operation, watch: names.projectionWatch }, winnerOf, { maxConnections })
}

/** Drains the backlog of `message.warm` operations the parent seeded for this process alone. */
const warmUp = async (message) => {
  const warm = await openSide(message, message.warmPrefix)
  try {
    const tally = await drain(warm, { ...message, name: `${message.name}-warm` })
    if (tally.committed !== message.warm) throw new Error(`the warm-up drained ${tally.committed} of ${message.warm}`)
  } finally {
    await warm.close()
  }
}

const open = async (message) => {
  setup = message
  if (message.warm > 0) await warmUp(message)
  steps = await openSide(message, message.tablePrefix)
  process.send({ type: "ready" })
}

const go = async () => {
  const cpu = process.cpuUsage()
  const tally = await drain(steps, setup)
  const used = process.cpuUsage(cpu)
  await steps.close()
  process.send({
    type: "done",
    tally,
    peakRssBytes: process.resourceUsage().maxRSS * 1024,
    cpuMicros: used.user + used.system
  }, () => process.exit(0))
}

process.on("message", (message) => {
  const step = message.type === "open" ? open(message) : message.type === "go" ? go() : Promise.reject(new Error(`unknown message ${message.type}`))
  step.catch(fail)
})
