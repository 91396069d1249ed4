import { ConnectorStore, type PromiseConnectorStore, StoreSnapshot } from "@connector-store/core"
import { openMemoryConnectorStore } from "@connector-store/memory-adapter"
import { openConnectorStore } from "@connector-store/sql-adapter"
import { Cause, Effect, Exit, ManagedRuntime } from "effect"
import fc from "fast-check"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import {
  badCallOf,
  ENTRY_POINTS,
  type EntryPoint,
  type GeneratedBadCall,
  namesPath,
  type Node,
  NO_INPUT_METHODS
} from "./support/contract/entryPoints.js"
import { NOW, operationRow, watchRow } from "./support/contract/fixtures.js"
import { seedOperations, seedWatches } from "./support/contract/store.js"
import { adaptersUnderTest, type AdapterUnderTest, type StoreServices } from "./support/stores.js"
import { propertyRuns } from "./support/runs.js"

// Generated invalid calls of every public entry point of both APIs: each is
// refused with an `InvalidInput` naming the method and the wrong field, and
// no table changes. So is a call that adds a key an input object does not
// know (a near miss names the key meant). Memory and SQLite get the full run; Postgres a smaller one.

const adapters = await adaptersUnderTest()
const runsOn = (adapter: AdapterUnderTest): number => {
  const base = Number(process.env["CONNECTOR_STORE_BAD_INPUT_RUNS"] ?? propertyRuns(40))
  return adapter.name === "postgres" ? Math.max(5, Math.floor(base / 4)) : base
}

/** Rows in every table a refused call could disturb. */
const seed = Effect.gen(function*() {
  yield* seedWatches(watchRow(), watchRow({ sourceID: "src-2", documentID: "doc-2", deferReason: "offline" }))
  yield* seedOperations(
    operationRow(),
    operationRow({ operationID: "op-2", state: "attempted", leaseToken: "lease-1", leaseExpiresAt: NOW + 60_000 })
  )
  const store = yield* ConnectorStore
  yield* store.setSyncState("gcal", "did:owner:1", { status: "idle", lastSyncedAt: "t", entityCount: 1, checkpoint: { c: 1 } })
  const scope = { ownerDID: "did:owner:1", connectorName: "gcal", model: "Event", accountKey: "acct-1" }
  const run = yield* store.startRelistRun(scope)
  yield* store.commitSweepCheckpoint(run.runID, { page: 1, cursor: "c", receipts: [{ sourceID: "src-1", digest: "d" }] })
})

const describeCall = (method: string, call: GeneratedBadCall) =>
  `${method}(${
    call.args.map((a) => typeof a === "symbol" ? "Symbol" : a === undefined ? "undefined" : JSON.stringify(a)?.slice(0, 80))
      .join(", ")
  }) wrong at ${call.path}: ${call.shown}`

/** Asserts `error` is the typed refusal of `call`. */
const expectRefusal = (error: unknown, method: string, call: GeneratedBadCall) => {
  const label = describeCall(method, call)
  expect(error, label).toMatchObject({ _tag: "InvalidInput", method })
  expect(namesPath((error as { field?: unknown }).field, call.path), `${label}: named ${String((error as { field?: unknown }).field)}`)
    .toBe(true)
}

type AnyMethods = Record<string, (...args: ReadonlyArray<unknown>) => unknown>

/**
 * The parameters that name an identity whose every part is required (a
 * whole row will do for them): other keys are allowed there, never read.
 */
const OPEN_PARAMS = new Set(["identity", "key", "lease", "scope", "ref"])

/** A call of an entry point with one key its input object does not know, and how it must be refused. */
interface UnknownKeyCall extends GeneratedBadCall {
  readonly field: string
  /** The known key a near miss must be suggested as, or none for a key like no other. */
  readonly meant: string | undefined
}

const validOfNode = (node: Node): unknown =>
  "constant" in node ? node.constant : "leaf" in node ? node.value : Object.fromEntries(
    Object.entries(node.record).map(([name, child]) => [name, validOfNode(child)])
  )

/**
 * Every call of `entry` that adds one key to one of its closed input
 * objects: a near miss of a known key (a trailing `_`, a different case) or
 * a key like no other. `undefined` when the entry has no closed object.
 */
const unknownKeyCallOf = (entry: EntryPoint): fc.Arbitrary<UnknownKeyCall> | undefined => {
  const closed = entry.params.flatMap(([name, node], index) =>
    "record" in node && !OPEN_PARAMS.has(name) ? [{ name, index, known: Object.keys(node.record) }] : []
  )
  if (closed.length === 0) return undefined
  return fc.constantFrom(...closed).chain(({ index, known, name }) =>
    fc.oneof(
      fc.constantFrom(...known).chain((meant) =>
        fc.constantFrom(...[`${meant}_`, meant.toLowerCase(), meant.toUpperCase()].filter((k) => !known.includes(k)))
          .map((key) => ({ key, meant }))
      ),
      fc.string({ minLength: 1, maxLength: 12 }).map((tail) => ({ key: `zz-${tail}-zz`, meant: undefined }))
    ).map(({ key, meant }): UnknownKeyCall => ({
      args: entry.params.map(([, node], i) =>
        i === index ? { ...(validOfNode(node) as object), [key]: "value" } : validOfNode(node)
      ),
      path: `${name}.${key}`,
      shown: key,
      field: `${name}.${key}`,
      meant
    }))
  )
}

/** Asserts `error` is the refusal of the unknown key of `call`. */
const expectUnknownKeyRefusal = (error: unknown, method: string, call: UnknownKeyCall) => {
  const label = describeCall(method, call)
  expect(error, label).toMatchObject({ _tag: "InvalidInput", method, field: call.field })
  const reason = String((error as { reason?: unknown }).reason)
  expect(reason, label).toMatch(/^is not a known field/)
  if (call.meant !== undefined) expect(reason, label).toMatch(/did you mean /)
}

describe("the generated bad calls", () => {
  it("cover every method of the Effect API", async () => {
    const runtime = ManagedRuntime.make(adapters[0]!.layer({}))
    const methods = await runtime.runPromise(ConnectorStore)
    await runtime.dispose()
    expect([...ENTRY_POINTS.map((e) => e.method), ...NO_INPUT_METHODS].sort()).toEqual(Object.keys(methods).sort())
  })
})

for (const adapter of adapters) {
  describe(`generated bad calls to the Effect API on ${adapter.name}`, () => {
    let runtime: ManagedRuntime.ManagedRuntime<StoreServices, unknown>
    const snapshot = () => runtime.runPromise(Effect.flatMap(StoreSnapshot, (s) => s.snapshot))

    beforeAll(async () => {
      runtime = ManagedRuntime.make(adapter.layer({ readWinner: () => Effect.succeed("w") }))
      await runtime.runPromise(seed)
    })
    afterAll(() => runtime.dispose())

    for (const entry of ENTRY_POINTS) {
      it(`${entry.method}: a typed InvalidInput naming the field, tables unchanged`, async () => {
        const store = (await runtime.runPromise(ConnectorStore)) as unknown as AnyMethods
        const before = await snapshot()
        await fc.assert(
          fc.asyncProperty(badCallOf(entry), async (call) => {
            const exit = await runtime.runPromiseExit(
              Effect.suspend(() => store[entry.method]!(...call.args) as Effect.Effect<unknown, unknown>)
            )
            if (Exit.isSuccess(exit) || !Cause.isFailType(exit.cause)) {
              expect.fail(`${describeCall(entry.method, call)}: ${Exit.isSuccess(exit) ? "succeeded" : Cause.pretty(exit.cause)}`)
            }
            expectRefusal(exit.cause.error, entry.method, call)
            expect(await snapshot(), describeCall(entry.method, call)).toEqual(before)
          }),
          { numRuns: runsOn(adapter), endOnFailure: true }
        )
      })

      const unknownKeyCall = unknownKeyCallOf(entry)
      if (unknownKeyCall === undefined) continue
      it(`${entry.method}: a key its input does not know is refused naming it, tables unchanged`, async () => {
        const store = (await runtime.runPromise(ConnectorStore)) as unknown as AnyMethods
        const before = await snapshot()
        await fc.assert(
          fc.asyncProperty(unknownKeyCall, async (call) => {
            const exit = await runtime.runPromiseExit(
              Effect.suspend(() => store[entry.method]!(...call.args) as Effect.Effect<unknown, unknown>)
            )
            if (Exit.isSuccess(exit) || !Cause.isFailType(exit.cause)) {
              expect.fail(`${describeCall(entry.method, call)}: ${Exit.isSuccess(exit) ? "succeeded" : Cause.pretty(exit.cause)}`)
            }
            expectUnknownKeyRefusal(exit.cause.error, entry.method, call)
            expect(await snapshot(), describeCall(entry.method, call)).toEqual(before)
          }),
          { numRuns: runsOn(adapter), endOnFailure: true }
        )
      })
    }
  })

  const name = adapter.name === "memory" ? "openMemoryConnectorStore" : `openConnectorStore on ${adapter.name}`
  describe(`generated bad calls to the Promise API (${name})`, () => {
    let store: PromiseConnectorStore<unknown>
    const snapshot = () =>
      store.runEffect(Effect.flatMap(StoreSnapshot, (s) => s.snapshot) as unknown as Effect.Effect<unknown, unknown, ConnectorStore>)

    beforeAll(async () => {
      store = adapter.name === "memory"
        ? openMemoryConnectorStore({ readWinner: () => "w", now: () => NOW })
        : await openConnectorStore({ ...(await adapter.connection()), readWinner: () => "w", now: () => NOW })
      await store.runEffect(seed as unknown as Effect.Effect<void, unknown, ConnectorStore>)
    })
    afterAll(() => store.close())

    for (const entry of ENTRY_POINTS.filter((e) => e.effectOnly !== true)) {
      it(`${entry.method}: rejects with a typed InvalidInput naming the field, tables unchanged`, async () => {
        const methods = store as unknown as AnyMethods
        const before = await snapshot()
        await fc.assert(
          fc.asyncProperty(badCallOf(entry), async (call) => {
            const error = await Promise.resolve().then(() => methods[entry.method]!(...call.args)).then(
              (value) => expect.fail(`${describeCall(entry.method, call)}: resolved ${JSON.stringify(value)}`),
              (e: unknown) => e
            )
            expectRefusal(error, entry.method, call)
            expect(await snapshot(), describeCall(entry.method, call)).toEqual(before)
          }),
          { numRuns: runsOn(adapter), endOnFailure: true }
        )
      })

      const unknownKeyCall = unknownKeyCallOf(entry)
      if (unknownKeyCall === undefined) continue
      it(`${entry.method}: rejects a key its input does not know naming it, tables unchanged`, async () => {
        const methods = store as unknown as AnyMethods
        const before = await snapshot()
        await fc.assert(
          fc.asyncProperty(unknownKeyCall, async (call) => {
            const error = await Promise.resolve().then(() => methods[entry.method]!(...call.args)).then(
              (value) => expect.fail(`${describeCall(entry.method, call)}: resolved ${JSON.stringify(value)}`),
              (e: unknown) => e
            )
            expectUnknownKeyRefusal(error, entry.method, call)
            expect(await snapshot(), describeCall(entry.method, call)).toEqual(before)
          }),
          { numRuns: runsOn(adapter), endOnFailure: true }
        )
      })
    }
  })
}
