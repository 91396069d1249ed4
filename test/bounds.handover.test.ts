import { ConnectorStore, WatchRepository } from "@connector-store/core"
import { CallBounds, type DirectDatabaseApi } from "@connector-store/core/adapter"
import { Context, Effect, Layer } from "effect"
import { afterEach, describe, expect, it } from "vitest"
import { NOW } from "./support/contract/fixtures.js"
import { seedWatches } from "./support/contract/store.js"
import { memoryPortsWithDirect, withWatchPort } from "./support/direct.js"
import { id, promiseStoreOver, readers, seeded } from "./support/laneScript.js"

/**
 * A call the direct rows hand to the ports (the database busy) and whose
 * bound runs out there answers `timeout` only once what it handed over has
 * stopped: a write already under way when the deadline passes ends first,
 * then its transaction is rolled back, and only then does the caller hear.
 */

const CALL_TIMEOUT_MS = 100
/** How long the port's watch write runs, uninterruptible: well past the bound, well within the stop grace (500 ms). */
const WRITE_MS = 250

const closing: Array<() => Promise<void>> = []
afterEach(async () => {
  await Promise.all(closing.splice(0).map((close) => close()))
})

/** A memory store whose direct database is always busy and whose port's watch write takes `WRITE_MS`, uninterruptible. */
const slowPortStore = () => {
  const write = { started: 0, ended: 0 }
  const ports = Layer.map(memoryPortsWithDirect(), (context) => {
    const watches = Context.get(context as Context.Context<WatchRepository>, WatchRepository)
    const port: WatchRepository["Type"] = {
      ...watches,
      update: (previous, next) =>
        Effect.uninterruptible(Effect.suspend(() => {
          write.started = performance.now()
          return Effect.zipRight(
            Effect.sleep(WRITE_MS),
            Effect.tap(watches.update(previous, next), () => Effect.sync(() => (write.ended = performance.now())))
          )
        }))
    }
    return withWatchPort(context, port, (direct): DirectDatabaseApi => ({ ...direct, begin: () => undefined }))
  })
  const bounded = Layer.merge(ports, CallBounds.layer({ callTimeoutMs: CALL_TIMEOUT_MS }))
  const { store } = promiseStoreOver(bounded, readers, { lane: true, dialect: "memory" }, closing)
  return { store, write }
}

const answeredAt = async (call: Promise<unknown>) => {
  try {
    return { value: await call, at: performance.now() }
  } catch (error) {
    return { error, at: performance.now() }
  }
}

describe("a call handed to the ports whose bound runs out there", () => {
  for (const api of ["Promise", "Effect"] as const) {
    it(`${api} API: answers timeout once the write under way has ended and its transaction is rolled back`, async () => {
      const { store, write } = slowPortStore()
      await store.runEffect(seedWatches(seeded))
      const before = await store.getWatch(id)
      const call = api === "Promise"
        ? store.armWatch(id, "manual", { dueAt: NOW })
        : store.runEffect(Effect.flatMap(ConnectorStore, (s) => s.armWatch(id, "manual", { dueAt: NOW })))
      const answer = await answeredAt(call)

      expect(answer.error).toMatchObject({ _tag: "PersistenceError", reason: "timeout", method: "armWatch" })
      expect(write.started).toBeGreaterThan(0)
      // The write ran past the deadline, and the caller heard only after it ended.
      expect(write.ended).toBeGreaterThan(0)
      expect(answer.at).toBeGreaterThanOrEqual(write.ended)
      expect(await store.getWatch(id)).toEqual(before)
    })
  }
})
