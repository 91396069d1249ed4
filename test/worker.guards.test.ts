import { openMemoryConnectorStore } from "@connector-store/memory-adapter"
import { FakeProvider } from "@connector-store/testkit/provider"
import { classifyFailure, type Connector, type HandlerFault, retryAfterOf, startWorker, statusOf, type WorkerEvents } from "@connector-store/worker"
import { describe, expect, it } from "vitest"
import { type Documents, editOf, eventually, FAST_POLICY, fakeConnector, type TestStore } from "./worker.support.js"

// The worker's guards on the memory store, its clock moved by hand: a lost
// lease aborts the send and never finalizes; stop() is bounded whatever a
// handler does; a handler that throws a non-Error, answers garbage or
// answers after its abort gets a typed record and changes nothing it
// should not; verification defers without an answer and repairs a
// mismatch; the default classify reads a status and a Retry-After.

const KEY = { callerDID: "did:example:laptop", operationID: "edit-1" }

/** A memory store whose clock runs from now plus `offset.ms`, and the edit of evt-1 enqueued on it. */
const setUp = async (options: { readonly leaseMs?: number } = {}) => {
  const offset = { ms: 0 }
  const documents: Documents = new Map([["doc-1", "digest-1"]])
  const store = openMemoryConnectorStore({
    readWinner: (id) => documents.get(id) ?? null,
    operationPolicy: { ...FAST_POLICY, leaseMs: options.leaseMs ?? FAST_POLICY.leaseMs },
    now: () => Date.now() + offset.ms
  }) as unknown as TestStore
  const provider = new FakeProvider()
  const entity = provider.seed("evt-1", "old", "doc-1")
  await store.enqueueOperation(editOf(1, "update", { ifMatch: entity.etag }))
  return { store, offset, documents, provider }
}

/** Every event of `event` a worker reports, as they come. */
const recorded = <E extends keyof WorkerEvents>(worker: { on: (e: E, l: (p: WorkerEvents[E]) => void) => () => void }, event: E) => {
  const out: Array<WorkerEvents[E]> = []
  worker.on(event, (payload) => out.push(payload))
  return out
}

describe("a lost lease", () => {
  it("that ran out on the store's clock while the send ran: the send's answer is not finalized", async () => {
    const { store, offset, provider } = await setUp()
    const gcal = fakeConnector(provider, "w1")
    let stalled = false
    const worker = startWorker(store, {
      connectors: { gcal: { ...gcal, send: async (operation, context) => {
        const sent = await gcal.send(operation, context)
        // The first time, the process stalls past its lease after the write landed; no one took it over.
        if (!stalled) offset.ms += FAST_POLICY.leaseMs + 1
        stalled = true
        return sent
      } } }
    })
    const drives = recorded(worker, "write-back")
    await eventually(() => drives.some((d) => d.outcome === "committed"))
    await worker.stop()
    expect(drives[0]).toMatchObject({ outcome: "abandoned", sent: true, leaseLoss: "expired" })
    // The next claim found it in doubt: its conditional re-send met 412, and the lookup committed it; applied once.
    expect(drives[1]).toMatchObject({ outcome: "committed", lookedUp: true })
    expect(provider.appliedOf("did:example:laptop/edit-1")).toHaveLength(1)
    expect(provider.check()).toEqual([])
    await store.close()
  })

  it("taken over by another worker: the send is aborted through its signal, its late answer dropped with a typed record", async () => {
    const { store, offset, provider } = await setUp({ leaseMs: 300 })
    const gcal = fakeConnector(provider, "w1")
    let abortedWith: unknown
    const worker = startWorker(store, {
      abortGraceMs: 50,
      connectors: { gcal: { ...gcal, send: async (operation, context) => {
        const sent = await gcal.send(operation, context)
        offset.ms += 301
        const other = await store.claimDueOperations({ limit: 1 })
        expect(other.claimed).toHaveLength(1) // another worker holds it now
        await new Promise((resolve) => context.signal.addEventListener("abort", resolve, { once: true }))
        abortedWith = context.signal.reason
        return sent // answers after its abort
      } } }
    })
    const drives = recorded(worker, "write-back")
    const faults = recorded(worker, "handler-fault")
    await eventually(() => drives.length === 1)
    await worker.stop()
    expect(abortedWith).toBeInstanceOf(Error)
    expect(drives[0]).toMatchObject({ outcome: "abandoned", sent: true })
    expect(faults.map((f) => [f.fault, f.handler])).toEqual([["answered-after-abort", "send"]])
    expect(await store.getOperation(KEY)).toMatchObject({ state: "attempted" }) // the other worker's to finish
    await store.close()
  })
})

describe("stop()", () => {
  it("is bounded when a send hangs and ignores its abort: it resolves, the operation left to its lease", async () => {
    const { store } = await setUp()
    let started!: () => void
    const sending = new Promise<void>((resolve) => { started = resolve })
    const worker = startWorker(store, {
      abortGraceMs: 20,
      connectors: { gcal: { send: () => (started(), new Promise(() => {})) } }
    })
    const faults = recorded(worker, "handler-fault")
    const stopped = recorded(worker, "stopped")
    await sending
    await worker.stop({ graceMs: 20 })
    await worker.done
    expect(stopped).toEqual([{ aborted: 1 }])
    expect(faults.map((f) => f.fault)).toEqual(["ignored-abort"])
    expect(worker.stats()).toMatchObject({ stopping: true, inFlight: 0, writeBacks: { committed: 0 } })
    expect(await store.getOperation(KEY)).toMatchObject({ state: "attempted", attempts: 1 })
    await store.close()
  })

  it("lets a send that answers within the grace period finish and commit", async () => {
    const { store, provider } = await setUp()
    const gcal = fakeConnector(provider, "w1")
    let started!: () => void
    const sending = new Promise<void>((resolve) => { started = resolve })
    const worker = startWorker(store, {
      connectors: { gcal: { ...gcal, send: async (operation, context) => {
        started()
        await new Promise((resolve) => setTimeout(resolve, 30))
        return gcal.send(operation, context)
      } } }
    })
    await sending
    await worker.stop({ graceMs: 10_000 })
    expect(await store.getOperation(KEY)).toMatchObject({ state: "committed" })
    await store.close()
  })
})

describe("a handler that misbehaves", () => {
  const cases: ReadonlyArray<readonly [string, Partial<Connector>, HandlerFault["fault"], string]> = [
    ["a send that answers a number", { send: async () => 42 }, "garbage", "send"],
    ["a send that answers an entity without an id", { send: async () => ({ id: 7, etag: "e" }) }, "garbage", "send"],
    ["a send that throws a string", { send: async () => { throw "boom" } }, "threw-non-error", "send"],
    ["a send that throws undefined", { send: () => Promise.reject(undefined) }, "threw-non-error", "send"],
    ["a classify that answers garbage", { send: async () => { throw new Error("reset") }, classify: () => ({ kind: "sometimes" }) as never }, "garbage", "classify"],
    ["a classify that throws", { send: async () => { throw new Error("reset") }, classify: () => { throw new TypeError("oops") } }, "garbage", "classify"],
    ["a send that never answers", { send: () => new Promise(() => {}) }, "timed-out", "send"]
  ]
  for (const [what, connector, fault, handler] of cases) {
    it(`${what}: a typed record; the operation stays attempted in doubt, never committed or dead`, async () => {
      const { store } = await setUp()
      const worker = startWorker(store, {
        sendTimeoutMs: 50,
        abortGraceMs: 20,
        connectors: { gcal: connector as Connector }
      })
      const faults = recorded(worker, "handler-fault")
      const drives = recorded(worker, "write-back")
      await eventually(() => drives.length >= 1)
      await worker.stop({ graceMs: 1 })
      expect(faults.find((f) => f.fault === fault)).toMatchObject({ name: "HandlerFault", fault, handler, connectorName: "gcal", subject: "did:example:laptop/edit-1" })
      expect(drives[0]).toMatchObject({ outcome: "retrying", sent: true })
      const row = await store.getOperation(KEY)
      expect(row).toMatchObject({ state: "attempted", lastKind: "unknown" })
      expect(row?.inDoubtSince).not.toBeNull()
      await store.close()
    })
  }

  it("an operation of a connector the worker lacks: deferred without a request, a typed record", async () => {
    const { store } = await setUp()
    let sends = 0
    const worker = startWorker(store, { connectors: { outlook: { send: async () => (sends++, { id: "x" }) } } })
    const faults = recorded(worker, "handler-fault")
    await eventually(() => faults.length >= 1)
    await worker.stop()
    expect(faults[0]).toMatchObject({ fault: "no-connector", connectorName: "gcal" })
    expect(sends).toBe(0)
    expect(await store.getOperation(KEY)).toMatchObject({ state: "attempted", attempts: 0, deferReason: "offline", inDoubtSince: null })
    await store.close()
  })

  it("refuses options it cannot run with, before it starts", () => {
    const store = openMemoryConnectorStore() as unknown as TestStore
    expect(() => startWorker(store, { connectors: { gcal: {} as Connector } })).toThrow(/connectors\.gcal\.send/)
    expect(() => startWorker(store, { connectors: {}, concurrency: 0 })).toThrow(/options\.concurrency/)
  })
})

describe("failures the store records", () => {
  it("a 429's Retry-After is the operation's next attempt; a 422 ends it dead and not in doubt", async () => {
    const { store } = await setUp()
    await store.enqueueOperation({ ...editOf(2, "update"), documentID: "doc-2" })
    const worker = startWorker(store, {
      connectors: { gcal: { send: async (operation) => {
        if (operation.operationID === "edit-1") throw Object.assign(new Error("slow down"), { response: { status: 429, headers: { "Retry-After": "120" } } })
        throw Object.assign(new Error("invalid"), { statusCode: 422 })
      } } }
    })
    const drives = recorded(worker, "write-back")
    await eventually(() => drives.length === 2)
    await worker.stop()
    const limited = await store.getOperation(KEY)
    expect(limited).toMatchObject({ state: "attempted", lastKind: "retryable", lastHTTPStatus: 429 })
    expect(limited!.nextAttemptAt! - store.now()).toBeGreaterThan(100_000)
    expect(await store.getOperation({ ...KEY, operationID: "edit-2" })).toMatchObject({ state: "dead", lastHTTPStatus: 422, inDoubtSince: null })
    await store.close()
  })
})

describe("a refusal of a re-send in doubt", () => {
  it("a delete whose first request landed unanswered, its re-send refused 422: still in doubt, then committed, never dead", async () => {
    const store = openMemoryConnectorStore({ readWinner: () => null, operationPolicy: FAST_POLICY }) as unknown as TestStore
    const provider = new FakeProvider({ fates: ["applied-no-answer", "422"] })
    provider.seed("evt-1", "old", "doc-1")
    await store.enqueueOperation(editOf(1, "delete"))
    const worker = startWorker(store, { connectors: { gcal: fakeConnector(provider, "w1") }, pollMs: 20 })
    const drives = recorded(worker, "write-back")
    await eventually(() => drives.some((d) => d.outcome === "committed" || d.outcome === "dead"))
    await worker.stop()
    expect(drives.map((d) => d.outcome)).toEqual(["retrying", "retrying", "committed"])
    expect(provider.appliedOf("did:example:laptop/edit-1")).toHaveLength(1)
    await store.close()
  })
})

describe("verification", () => {
  it("verifies a committed write, defers without spending an attempt when the provider does not answer, repairs a mismatch", async () => {
    const { store, documents, provider } = await setUp()
    const gcal = fakeConnector(provider, "w1")
    let answering = false
    const repaired: Array<string | null> = []
    const worker = startWorker(store, {
      verifyAfterMs: 1,
      verifyRetryMs: 1,
      connectors: { gcal: {
        ...gcal,
        verify: async (watch, context) => {
          if (!answering) throw new Error("offline")
          return gcal.verify!(watch, context)
        },
        repair: async (watch, digest) => {
          repaired.push(digest)
          documents.set(watch.documentID, digest!)
        }
      } }
    })
    const verifications = recorded(worker, "verification")
    await eventually(() => verifications.some((v) => v.outcome === "deferred"))
    expect((await store.getWatchByDocument("doc-1"))?.verificationAttempts).toBe(0)
    provider.editElsewhere("evt-1", "digest-elsewhere") // someone edits it at the provider
    answering = true
    await eventually(() => verifications.some((v) => v.outcome === "verified"))
    await worker.stop()
    expect(verifications.find((v) => v.outcome === "pending")).toMatchObject({ repaired: true })
    expect(repaired).toEqual(["digest-elsewhere"])
    expect(await store.getWatchByDocument("doc-1")).toMatchObject({ verificationStatus: "verified" })
    await store.close()
  })

  it("a verify that answers garbage: a typed record, the watch deferred", async () => {
    const { store, provider } = await setUp()
    const worker = startWorker(store, {
      verifyAfterMs: 1,
      verifyRetryMs: 60_000,
      connectors: { gcal: { ...fakeConnector(provider, "w1"), verify: async () => 42 as never } }
    })
    const faults = recorded(worker, "handler-fault")
    await eventually(() => faults.length >= 1)
    await worker.stop()
    expect(faults[0]).toMatchObject({ fault: "garbage", handler: "verify" })
    expect(await store.getWatchByDocument("doc-1")).toMatchObject({ verificationStatus: "pending_verification", verificationAttempts: 0 })
    await store.close()
  })
})

describe("the default classify", () => {
  it("reads the status from status, statusCode or response.status, and Retry-After in seconds, as a date, or as retryAfterMs", () => {
    expect(statusOf({ status: 503 })).toBe(503)
    expect(statusOf({ statusCode: 404 })).toBe(404)
    expect(statusOf({ response: { status: 412 } })).toBe(412)
    expect(statusOf(new Error("reset"))).toBeUndefined()
    expect(retryAfterOf({ retryAfterMs: 250 })).toBe(250)
    expect(retryAfterOf({ response: { headers: new Headers({ "retry-after": "3" }) } })).toBe(3_000)
    expect(retryAfterOf({ headers: { "Retry-After": new Date(10_000).toUTCString() } }, 4_000)).toBe(6_000)
    expect(classifyFailure({ status: 429, retryAfterMs: 5 })).toEqual({ kind: "retryable", httpStatus: 429, retryAfterMs: 5 })
    expect(classifyFailure({ status: 401 })).toEqual({ kind: "auth", httpStatus: 401 })
    expect(classifyFailure({ status: 409 })).toEqual({ kind: "permanent", httpStatus: 409 })
    expect(classifyFailure({ status: 502 })).toEqual({ kind: "retryable", httpStatus: 502 })
    expect(classifyFailure({ status: "offline" })).toEqual({ kind: "offline" })
    expect(classifyFailure(Object.assign(new Error("dns"), { code: "ENOTFOUND" }))).toEqual({ kind: "offline" })
    expect(classifyFailure(new Error("socket hang up"))).toEqual({ kind: "unknown" })
    expect(classifyFailure("garbled")).toEqual({ kind: "unknown" })
  })
})
