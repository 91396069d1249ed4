import { openConnectorStore } from "@connector-store/promise"
import { lifecycleOver, lifecyclePlan, winnerOf } from "/work/main/bench/support/operation-lifecycle.mjs"
const prefix = `prof_${process.pid}_`
const store = await openConnectorStore({ url: "postgres://postgres@127.0.0.1:5432/test", tablePrefix: prefix, readWinner: winnerOf })
const run = lifecycleOver(store, lifecyclePlan(), { markSent: true })
for (let i = 0; i < 500; i++) await run(0)
const t0 = performance.now(); const c0 = process.cpuUsage()
const N = Number(process.argv[2] ?? 3000)
for (let i = 0; i < N; i++) await run(0)
const c = process.cpuUsage(c0); const t = performance.now() - t0
console.log(`${N} lifecycles: ${(N / t * 1000).toFixed(0)}/s, client CPU ${((c.user + c.system) / N).toFixed(0)} µs per lifecycle`)
await store.close()
