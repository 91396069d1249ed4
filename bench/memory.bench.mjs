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

export default {
  title: `memory adapter: ${TRANSITIONS.toLocaleString("en-US")} transitions in lifecycles of ${PER_LIFECYCLE}`,
  cases: [
    {
      name: "memory · Promise API · growing tables",
      run: async () => {
        const store = openMemoryConnectorStore({ readWinner: winnerOf })
        try {
          const lifecycle = lifecycleOver(store, lifecyclePlan())
          const lifecycles = Math.ceil(TRANSITIONS / PER_LIFECYCLE)
          const started = performance.now()
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
          return [
            `    ${(lifecycles * PER_LIFECYCLE).toLocaleString("en-US")} transitions in ${Math.round(elapsed)} ms ` +
            `(${Math.round(lifecycles * PER_LIFECYCLE / elapsed * 1000).toLocaleString("en-US")}/s)`,
            `    ms per 1,000 lifecycles as the tables grow: ${tail.join(", ")}`
          ]
        } finally {
          await store.close?.()
        }
      }
    }
  ]
}
