import {
  ConnectorStore,
  OperationPolicy,
  type PromiseConnectorStore,
  StoreMetrics,
  WatchRepository,
  WinnerReader
} from "@connector-store/core"
import { DirectDatabase, type DirectDatabaseApi, fromPromiseReaders, makePromiseStore } from "@connector-store/core/adapter"
import * as Memory from "@connector-store/memory-adapter"
import { Context, Effect, Layer, ManagedRuntime, Metric, type MetricState } from "effect"
import { afterEach, describe, expect, it } from "vitest"
import { NOW } from "./support/contract/fixtures.js"
import { seedWatches } from "./support/contract/store.js"
import { freshSqlitePath } from "./support/databases.js"
import { sqlitePortsWithDirect, withWatchPort } from "./support/direct.js"
import { id, seeded } from "./support/laneScript.js"

/**
 * One call, one budget: a call's lost tries count against one budget of 6
 * whichever runner each ran on (the Effect API's direct runner, the Promise
 * lane, the ports they hand over to when the database is busy), its input
 * is checked once, and a busy database makes it begin once per try, never
 * again on the way to the ports.
 */

const closing: Array<() => Promise<void>> = []
afterEach(async () => {
  await Promise.all(closing.splice(0).map((close) => close()))
})

/** What a test makes the store do: versioned watch writes that lose, and a direct database that goes busy. */
interface Plan {
  /** Direct watch writes still to lose. */
  directLosses: number
  /** Port watch writes still to lose. */
  portLosses: number
  /** Direct transactions that may begin before the database answers busy to every begin. */
  beginsBeforeBusy: number
  begun: number
  busy: number
}

const planOf = (directLosses: number, beginsBeforeBusy: number, portLosses: number): Plan => ({
  directLosses,
  portLosses,
  beginsBeforeBusy,
  begun: 0,
  busy: 0
})

/** `context` with its watch port and its direct database rigged by `plan` (the direct database speaking for the rigged port, so the store keeps using it). */
const rigged = <C>(context: Context.Context<C>, plan: Plan): Context.Context<C> => {
  const watches = Context.get(context as Context.Context<C | WatchRepository>, WatchRepository)
  const port: WatchRepository["Type"] = {
    ...watches,
    update: (previous, next) => plan.portLosses-- > 0 ? Effect.succeed(false) : watches.update(previous, next)
  }
  return withWatchPort(context, port, (direct): DirectDatabaseApi => ({
    ...direct,
    watches: { ...direct.watches, update: (previous, next) => plan.directLosses-- > 0 ? false : direct.watches.update(previous, next) },
    begin: () => {
      if (plan.begun >= plan.beginsBeforeBusy) {
        plan.busy++
        return undefined
      }
      const transaction = direct.begin()
      if (transaction === undefined) plan.busy++
      else plan.begun++
      return transaction
    }
  }))
}

const backends = {
  memory: () => Layer.effectContext(Effect.sync(() => Memory.portsOf(new Memory.MemoryDatabase()) as Context.Context<Memory.MemoryPorts | DirectDatabase>)),
  sqlite: () => sqlitePortsWithDirect(freshSqlitePath())
} as const

const readers = { readWinner: (documentID: string) => `w-${documentID}` }

/** A store on `backend` rigged by `plan`, called through the Effect or the Promise API. */
const storeOn = (backend: keyof typeof backends, api: "effect" | "promise", plan: Plan) => {
  const handle = Effect.succeed({})
  const ports = Layer.map(backends[backend]() as Layer.Layer<WatchRepository | DirectDatabase, unknown>, (context) => rigged(context, plan))
  const layer = ConnectorStore.layer.pipe(
    Layer.provideMerge(Layer.succeed(WinnerReader, fromPromiseReaders(readers, handle))),
    Layer.provideMerge(ports as never),
    Layer.provideMerge(OperationPolicy.layer(undefined))
  ) as Layer.Layer<ConnectorStore, unknown>
  const runtime = ManagedRuntime.make(layer)
  const promise: PromiseConnectorStore<unknown> = makePromiseStore({ runtime: runtime as never, handle, readers })
  closing.push(() => promise.close())
  const seed = () => promise.runEffect(seedWatches(seeded))
  const arm = (options: { readonly dueAt: number }) =>
    api === "promise"
      ? promise.armWatch(id, "manual", options)
      : promise.runEffect(Effect.flatMap(ConnectorStore, (s) => s.armWatch(id, "manual", options)))
  return { seed, arm }
}

const lostArmTries = () =>
  Effect.runPromise(Effect.map(
    Metric.value(Metric.tagged(StoreMetrics.lostRaceRetries, "method", "armWatch")),
    (state: MetricState.MetricState.Counter<number>) => state.count
  ))

/** Options whose `dueAt` counts how often it is read. */
const counted = () => {
  const reads = { dueAt: 0 }
  return { reads, options: { get dueAt() { reads.dueAt++; return NOW } } }
}

for (const backend of ["memory", "sqlite"] as const) {
  for (const api of ["effect", "promise"] as const) {
    describe(`one budget per call on ${backend}, through the ${api === "effect" ? "Effect" : "Promise"} API`, () => {
      it("3 lost direct tries, a busy database, 2 lost tries on the ports: the 6th try lands", async () => {
        const plan = planOf(3, 3, 2)
        const store = storeOn(backend, api, plan)
        await store.seed()
        const before = await lostArmTries()
        expect(await store.arm({ dueAt: NOW })).toBe("opened")
        expect(await lostArmTries()).toBe(before + 5)
        expect({ begun: plan.begun, busy: plan.busy }).toEqual({ begun: 3, busy: 1 })
      })

      it("3 lost direct tries, a busy database, 3 lost on the ports: ConcurrentUpdateExhausted after 6 in all", async () => {
        const plan = planOf(3, 3, 3)
        const store = storeOn(backend, api, plan)
        await store.seed()
        const before = await lostArmTries()
        await expect(store.arm({ dueAt: NOW })).rejects.toMatchObject({
          _tag: "ConcurrentUpdateExhausted",
          method: "armWatch",
          attempts: 6
        })
        expect(await lostArmTries()).toBe(before + 6)
        expect({ begun: plan.begun, busy: plan.busy }).toEqual({ begun: 3, busy: 1 })
        expect(plan.portLosses).toBe(0)
      })

      it("checks its input once, whether it runs on the direct rows or is handed to the ports", async () => {
        const free = storeOn(backend, api, planOf(0, Infinity, 0))
        await free.seed()
        const direct = counted()
        expect(await free.arm(direct.options)).toBe("opened")

        const plan = planOf(0, 0, 0)
        const busy = storeOn(backend, api, plan)
        await busy.seed()
        const handedOver = counted()
        expect(await busy.arm(handedOver.options)).toBe("opened")
        expect(plan.busy).toBe(1)
        expect(handedOver.reads.dueAt).toBeGreaterThan(0)
        expect(handedOver.reads.dueAt).toBe(direct.reads.dueAt)
      })
    })
  }
}
