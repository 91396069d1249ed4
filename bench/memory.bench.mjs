// The memory adapter at size: 10,000 transitions (claim → markSent →
// finalize-and-arm lifecycles, each on a new operation and watch) through
// openMemoryConnectorStore, timed end to end. The tables grow as it runs, so
// a per-transaction cost that grows with the table shows here.
//
//   npm run bench -- memory
import { openMemoryConnectorStore } from "@connector-store/memory-adapter"
import { performance } from "node:perf_hooks"
import { lifecycleOver, lifecyclePlan, winnerOf } from "./support/operation-lifecycle.mjs"

const TRANSITIONS = Number(process.env.BENCH_MEMORY_TRANSITIONS ?? 10_000)
const PER_LIFECYCLE = 3

/** One case: the whole run through a store whose winner reader answers as `readWinner` does. */
const memoryCase = (name, readWinner) => ({
  name,
  run: async () => {
    const store = openMemoryConnectorStore({ readWinner })
    try {
      const lifecycle = lifecycleOver(store, lifecyclePlan())
      const lifecycles = Math.ceil(TRANSITIONS / PER_LIFECYCLE)
      const started = performance.now()
      const cpuStarted = process.cpuUsage()
      let lastThousand = started
      const tail = []
      for (let i = 0; i < lifecycles; i++) {
        await lifecycle(0)
        if ((i + 1) % 1_000 === 0) {
          const now = performance.now()
          tail.push(Math.round(now - lastThousand))
          lastThousand = now
        }
      }
      const elapsed = performance.now() - started
      const cpu = process.cpuUsage(cpuStarted)
      return [
        `    ${(lifecycles * PER_LIFECYCLE).toLocaleString("en-US")} transitions in ${Math.round(elapsed)} ms ` +
        `(${Math.round(lifecycles * PER_LIFECYCLE / elapsed * 1000).toLocaleString("en-US")}/s), ` +
        `process CPU ${Math.round((cpu.user + cpu.system) / 1000)} ms`,
        `    ms per 1,000 lifecycles as the tables grow: ${tail.join(", ")}`
      ]
    } finally {
      await store.close?.()
    }
  }
})

export default {
  title: `memory adapter: ${TRANSITIONS.toLocaleString("en-US")} transitions in lifecycles of ${PER_LIFECYCLE}`,
  cases: [
    // A synchronous reader: every transition completes on the caller's stack, without the scheduler.
    memoryCase("memory · Promise API · growing tables", winnerOf),
    // The same with a reader returning a Promise: one hop per finalize.
    memoryCase("memory · Promise API · growing tables · asynchronous reader", async (documentID) => winnerOf(documentID))
  ]
}
