import { ConnectorStore, StoreMetrics } from "@connector-store/core"
import * as Memory from "@connector-store/memory-adapter"
import * as Sql from "@connector-store/sql-adapter"
import { Effect, Exit, Layer, Metric, MetricState, Option, TestContext } from "effect"
import { describe, expect, it } from "vitest"
import { claimInput, KEY } from "./operations.fixtures.js"
import { identityOf, NOW, watchRow } from "./support/contract/fixtures.js"
import { interferedStore } from "./support/contract/interference.js"
import { at, seedWatches } from "./support/contract/store.js"
import { Winners } from "./support/contract/winners.js"
import { freshSqlitePath } from "./support/databases.js"
import { type RecordedSpan, recordingTracer, watchingLogsAndSpans } from "./support/secrecy.js"

const counterValue = (metric: Metric.Metric.Counter<number>): Effect.Effect<number> =>
  Effect.map(Metric.value(metric), (state: MetricState.MetricState.Counter<number>) => state.count)

const callsOf = (method: string, outcome: string) =>
  Metric.tagged(Metric.tagged(StoreMetrics.calls, "method", method), "outcome", outcome)

const spansNamed = (spans: ReadonlyArray<RecordedSpan>, name: string) => spans.filter((s) => s.name === name)

const stores = [
  { name: "memory", open: (options: Record<string, unknown>) => Promise.resolve(Memory.openMemoryConnectorStore(options)) },
  { name: "sqlite", open: (options: Record<string, unknown>) => Sql.openConnectorStore({ url: freshSqlitePath(), ...options }) }
] as const

describe.each(stores)("spans and metrics on $name, through the Promise API's observability layer", ({ open }) => {
  it("each public call is one span connector-store.<method> with its identity, outcome and attempts", async () => {
    const spans: Array<RecordedSpan> = []
    const store = await open({ now: () => NOW, observability: Layer.setTracer(recordingTracer(spans)) })
    try {
      await store.claimOperation(claimInput())
      await store.getOperation(KEY)
      await store.getWatch(identityOf()).catch(() => undefined)
    } finally {
      await store.close()
    }
    const [claim] = spansNamed(spans, "connector-store.claimOperation")
    expect(claim).toBeDefined()
    expect(Object.fromEntries(claim!.attributes)).toMatchObject({
      "connector-store.callerDID": "did:caller:1",
      "connector-store.operationID": "op-1",
      "connector-store.ownerDID": "did:owner:1",
      "connector-store.connectorName": "gcal",
      "connector-store.documentID": "doc-1",
      "connector-store.outcome": "claimed",
      "connector-store.attempts": 1,
      "connector-store.retries": 0
    })
    expect(claim!.exit !== undefined && Exit.isSuccess(claim!.exit)).toBe(true)
    expect(spansNamed(spans, "connector-store.getOperation")).toHaveLength(1)
    expect(spansNamed(spans, "connector-store.getWatch")).toHaveLength(1)
    // The payload, the target and the hash are not identity: they stay off the span.
    expect(Object.keys(Object.fromEntries(claim!.attributes)).some((k) => /payload|target|Hash/.test(k))).toBe(false)
  })

  it("a refused call's span carries the error's tag as its outcome and fails; the outcome counter counts it", async () => {
    const spans: Array<RecordedSpan> = []
    const store = await open({ now: () => NOW, observability: Layer.setTracer(recordingTracer(spans)) })
    const counted = callsOf("getWatchByDocument", "InvalidInput")
    const before = await Effect.runPromise(counterValue(counted))
    try {
      await expect(store.getWatchByDocument("")).rejects.toMatchObject({ _tag: "InvalidInput", method: "getWatchByDocument" })
    } finally {
      await store.close()
    }
    const [span] = spansNamed(spans, "connector-store.getWatchByDocument")
    expect(span?.attributes.get("connector-store.outcome")).toBe("InvalidInput")
    expect(span?.exit !== undefined && Exit.isFailure(span.exit)).toBe(true)
    expect(await Effect.runPromise(counterValue(counted))).toBe(before + 1)
  })

  it("a read that answers null (and one that finds its row) reports outcome ok on its span and counter", async () => {
    const spans: Array<RecordedSpan> = []
    const store = await open({ now: () => NOW, observability: Layer.setTracer(recordingTracer(spans)) })
    const ok = callsOf("getOperation", "ok")
    const before = await Effect.runPromise(counterValue(ok))
    try {
      expect(await store.getOperation(KEY)).toBeNull()
      await store.claimOperation(claimInput())
      expect(await store.getOperation(KEY)).not.toBeNull()
    } finally {
      await store.close()
    }
    const outcomes = spansNamed(spans, "connector-store.getOperation").map((s) => s.attributes.get("connector-store.outcome"))
    expect(outcomes).toEqual(["ok", "ok"])
    expect(await Effect.runPromise(counterValue(ok))).toBe(before + 2)
    expect(await Effect.runPromise(counterValue(callsOf("getOperation", "None")))).toBe(0)
  })

  it("the due sweep records how many operations and watches it returned", async () => {
    const store = await open({ now: () => NOW, readWinners: async () => new Map() })
    const sizes = (kind: string) =>
      Effect.runPromise(Effect.map(Metric.value(Metric.tagged(StoreMetrics.dueSweepSize, "kind", kind)), (s) => [s.count, s.sum]))
    try {
      await store.claimOperation(claimInput())
      await store.markOperationSent(KEY, { leaseToken: (await store.getOperation(KEY))!.leaseToken! })
      const [opsCount, opsSum] = await sizes("operations")
      const [watchCount] = await sizes("watches")
      const due = await store.listDueOperations(NOW + 86_400_000)
      expect(await sizes("operations")).toEqual([opsCount! + 1, opsSum! + due.operations.length])
      expect((await sizes("watches"))[0]).toBe(watchCount! + 1)
      expect(due.operations.length).toBe(1)
    } finally {
      await store.close()
    }
  })
})

describe("spans on the Effect API", () => {
  it("an Effect API call is one span connector-store.<method>, with its identity, inside the caller's trace", async () => {
    const watched = await Effect.runPromise(
      Effect.gen(function*() {
        yield* at(NOW)
        return yield* watchingLogsAndSpans(Effect.flatMap(ConnectorStore, (s) => s.claimOperation(claimInput())))
      }).pipe(Effect.provide(Memory.layer({})), Effect.provide(TestContext.TestContext))
    )
    const outer = spansNamed(watched.spans, "test.watched")
    const claim = spansNamed(watched.spans, "connector-store.claimOperation")
    expect([outer.length, claim.length]).toEqual([1, 1])
    expect(claim[0]!.attributes.get("connector-store.operationID")).toBe("op-1")
  })

  it("an Effect API read that answers Option.none reports outcome ok on its span and counter", async () => {
    const ok = callsOf("getSyncState", "ok")
    const before = await Effect.runPromise(counterValue(ok))
    const watched = await Effect.runPromise(
      watchingLogsAndSpans(Effect.flatMap(ConnectorStore, (s) => s.getSyncState("gcal", "did:owner:nobody"))).pipe(
        Effect.provide(Memory.layer({}))
      )
    )
    expect(Exit.isSuccess(watched.exit) && Option.isNone(watched.exit.value as Option.Option<unknown>)).toBe(true)
    const [span] = spansNamed(watched.spans, "connector-store.getSyncState")
    expect(span?.attributes.get("connector-store.outcome")).toBe("ok")
    expect(await Effect.runPromise(counterValue(ok))).toBe(before + 1)
  })

  it("a lost race counts in the retry metric and on the span as attempts and retries", async () => {
    const lost = Metric.tagged(StoreMetrics.lostRaceRetries, "method", "armWatch")
    const store = interferedStore(
      (call, next, expected, { concurrently, write }) => {
        if (call > 2) return write(next, expected)
        concurrently(next, (row) => ({ ...row, nextAttemptAt: NOW + 3_000 + call }))
        return Effect.succeed(false)
      },
      new Winners({ "doc-1": "w-new" }).single()
    )
    const before = await Effect.runPromise(counterValue(lost))
    const watched = await Effect.runPromise(
      Effect.gen(function*() {
        yield* at(NOW)
        yield* seedWatches(watchRow({ nextAttemptAt: NOW + 5_000 }))
        return yield* watchingLogsAndSpans(Effect.flatMap(ConnectorStore, (s) =>
          s.armWatch(identityOf(), "ingress", { dueAt: NOW + 4_000, triggeringWinner: "w-new" })))
      }).pipe(Effect.provide(store.layer), Effect.provide(TestContext.TestContext))
    )
    expect(Exit.isSuccess(watched.exit)).toBe(true)
    expect(await Effect.runPromise(counterValue(lost))).toBe(before + 2)
    const [span] = spansNamed(watched.spans, "connector-store.armWatch")
    expect(Object.fromEntries(span!.attributes)).toMatchObject({
      "connector-store.attempts": 3,
      "connector-store.retries": 2,
      "connector-store.outcome": "coalesced",
      "connector-store.sourceID": "src-1"
    })
  })

  it("the documented OpenTelemetry setup exports the store's spans (NodeSdk, in-memory exporter)", async () => {
    const { NodeSdk } = await import("@effect/opentelemetry")
    const { InMemorySpanExporter, SimpleSpanProcessor } = await import("@opentelemetry/sdk-trace-base")
    const exporter = new InMemorySpanExporter()
    const store = Memory.openMemoryConnectorStore({
      now: () => NOW,
      observability: NodeSdk.layer(() => ({
        resource: { serviceName: "connector-store-test" },
        spanProcessor: new SimpleSpanProcessor(exporter)
      }))
    })
    await store.claimOperation(claimInput())
    // Read before close: the exporter forgets its spans when the SDK shuts down with the store.
    const exported = exporter.getFinishedSpans().find((s) => s.name === "connector-store.claimOperation")
    await store.close()
    expect(exported?.attributes).toMatchObject({ "connector-store.outcome": "claimed", "connector-store.operationID": "op-1" })
    expect(Option.isSome(Option.fromNullable(exported))).toBe(true)
  })
})
