// The packed memory adapter, from an app with its own `effect`.
import { layer, openMemoryConnectorStore } from "@connector-store/memory-adapter"
import { Effect } from "effect"
import { checkAdapterEntry } from "./adapter.js"
import { effectCycle, mixedCall, promiseCycle } from "./cycle.js"

const winners = new Map<string, string>([["doc-promise", "w1"], ["doc-effect", "w1"]])

const store = openMemoryConnectorStore({ readWinner: async (id) => winners.get(id) ?? null })
await promiseCycle(store, "promise")
await mixedCall(store, "promise")
await checkAdapterEntry(store)
await store.close()
console.log("memory: Promise API ok, @connector-store/core/adapter ok")

await Effect.runPromise(effectCycle("effect").pipe(
  Effect.provide(layer({ readWinner: (id) => Effect.succeed(winners.get(id) ?? null) }))
))
console.log("memory: Effect API ok")
