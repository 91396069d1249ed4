// Counting the statements a store sends to its database, honestly: on
// Postgres at the wire, by a TCP proxy that counts the server's
// ReadyForQuery messages (one per round trip: a simple query, or a parsed,
// bound and executed statement ending in Sync, whichever the driver sends);
// on SQLite at the engine, by counting every statement better-sqlite3 runs
// (BEGIN and COMMIT included). Used by bench/roundtrips.bench.mjs and by
// test/roundtrips.test.ts, which pins the counts.
import { watchIdentityOf } from "@connector-store/core"
import { createRequire } from "node:module"
import { createConnection, createServer } from "node:net"

/** ReadyForQuery: the server's "your turn" after every query cycle. */
const READY_FOR_QUERY = 0x5a

/**
 * Starts a proxy on 127.0.0.1 (a free port) in front of `target`, counting
 * the server's ReadyForQuery messages over every connection through it.
 * Returns { port, roundTrips(), close() }.
 */
export const startRoundTripProxy = (target) => {
  let roundTrips = 0
  const sockets = new Set()
  const server = createServer((client) => {
    const upstream = createConnection({ host: target.host, port: target.port })
    sockets.add(client)
    sockets.add(upstream)
    const closeBoth = () => {
      client.destroy()
      upstream.destroy()
      sockets.delete(client)
      sockets.delete(upstream)
    }
    let pending = Buffer.alloc(0)
    upstream.on("data", (chunk) => {
      // Server messages: a type byte, then an int32 length that includes itself.
      pending = pending.length === 0 ? chunk : Buffer.concat([pending, chunk])
      let offset = 0
      while (pending.length - offset >= 5) {
        const length = pending.readInt32BE(offset + 1)
        if (pending.length - offset < 1 + length) break
        if (pending[offset] === READY_FOR_QUERY) roundTrips++
        offset += 1 + length
      }
      pending = pending.subarray(offset)
      client.write(chunk)
    })
    client.on("data", (chunk) => upstream.write(chunk))
    client.on("error", closeBoth)
    upstream.on("error", closeBoth)
    client.on("close", closeBoth)
    upstream.on("close", closeBoth)
  })
  return new Promise((resolve, reject) => {
    server.once("error", reject)
    server.listen(0, "127.0.0.1", () => {
      resolve({
        port: server.address().port,
        roundTrips: () => roundTrips,
        close: () =>
          new Promise((done) => {
            for (const socket of sockets) socket.destroy()
            server.close(() => done())
          })
      })
    })
  })
}

/** `url` (a Postgres URL) pointed at the proxy on `port`, and the server it pointed at. */
export const throughProxy = (url) => {
  const parsed = new URL(url)
  const target = { host: parsed.hostname, port: Number(parsed.port || 5432) }
  return {
    target,
    at: (port) => {
      const proxied = new URL(url)
      proxied.hostname = "127.0.0.1"
      proxied.port = String(port)
      return proxied.toString()
    }
  }
}

let sqliteStatements = 0
let sqliteCounting = false

/**
 * Counts every statement better-sqlite3 runs in this process from now on
 * (run/get/all/iterate of a prepared statement, and exec), whichever client
 * drives it. Returns a reader of the running count.
 */
export const countSqliteStatements = () => {
  if (!sqliteCounting) {
    sqliteCounting = true
    const Database = createRequire(import.meta.url)("better-sqlite3")
    const probe = new Database(":memory:")
    const statement = Object.getPrototypeOf(probe.prepare("SELECT 1"))
    for (const method of ["run", "get", "all", "iterate"]) {
      const original = statement[method]
      statement[method] = function(...args) {
        sqliteStatements++
        return original.apply(this, args)
      }
    }
    const exec = Database.prototype.exec
    Database.prototype.exec = function(...args) {
      sqliteStatements++
      return exec.apply(this, args)
    }
    probe.close()
  }
  return () => sqliteStatements
}

/** The public methods the round-trip table reports, in its order. */
export const ROUND_TRIP_METHODS = [
  "claimOperation (new key)",
  "claimOperation (busy)",
  "claimOperation (takeover)",
  "claimOperation (new key, markSent)",
  "claimOperation (takeover, markSent)",
  "markOperationSent",
  "renewOperationLease",
  "recordAttemptFailure",
  "finalizeOperationAndArmWatch",
  "armWatch",
  "claimWatchAttempt",
  "deferWatch",
  "recordVerification",
  "getWatch",
  "listDueOperations"
]

/**
 * Runs each public method of `ROUND_TRIP_METHODS` once on `store` (a
 * Promise-API store opened with an injected clock that `advance(ms)` moves
 * on), each with an outcome that writes (but "claimOperation (busy)"), and
 * returns how much `count()` grew during each call, by method name. Fails on
 * any unexpected outcome: a count of a no-op would pin nothing. `tag` keeps
 * the rows of several runs apart.
 */
export const measureRoundTrips = async (store, count, advance, tag) => {
  const counts = {}
  const measure = async (method, call) => {
    const before = count()
    const result = await call()
    counts[method] = count() - before
    return result
  }
  const expect = (method, got, outcome) => {
    const seen = typeof got === "object" && got !== null && "outcome" in got ? got.outcome : got
    if (seen !== outcome) throw new Error(`${method} answered ${JSON.stringify(seen)}, expected ${JSON.stringify(outcome)}`)
  }
  const claimInput = (operationID, sourceID, documentID) => ({
    callerDID: `did:rt:${tag}`,
    operationID,
    ownerDID: `did:rt:owner-${tag}`,
    connectorName: "rt-connector",
    model: "Event",
    op: "update",
    accountKey: "rt@example.com",
    target: "calendars/primary",
    sourceID,
    deterministicEventID: `event-${operationID}`,
    payloadHash: `hash-${operationID}`,
    reissueIntent: { kind: "conditional-update", ifMatch: "etag-0" },
    providerEtag: "etag-0",
    documentID,
    leaseMs: 30_000
  })
  const key = (operationID) => ({ callerDID: `did:rt:${tag}`, operationID })
  // Warm the pool and the statement caches with one whole lifecycle first.
  const warm = await store.claimOperation(claimInput("warm", "source-warm", "doc-warm"))
  await store.markOperationSent(key("warm"), { leaseToken: warm.lease.token })
  await store.finalizeOperationAndArmWatch(key("warm"), {
    leaseToken: warm.lease.token, sourceID: "source-warm", documentID: "doc-warm", watchDueAt: store.now()
  })

  const input = claimInput("op-1", "source-1", "doc-1")
  expect("claimOperation", await measure("claimOperation (new key)", () => store.claimOperation(input)), "claimed")
  expect("claimOperation", await measure("claimOperation (busy)", () => store.claimOperation(input)), "busy")
  advance(30_001)
  const claimed = await measure("claimOperation (takeover)", () => store.claimOperation(input))
  expect("claimOperation", claimed, "claimed")
  const token = claimed.lease.token
  expect("renewOperationLease", await measure("renewOperationLease", () => store.renewOperationLease(key("op-1"), { leaseToken: token })), "renewed")
  expect("markOperationSent", await measure("markOperationSent", () => store.markOperationSent(key("op-1"), { leaseToken: token })), "sent")
  const finalized = await measure("finalizeOperationAndArmWatch", () =>
    store.finalizeOperationAndArmWatch(key("op-1"), {
      leaseToken: token,
      sourceID: "source-1",
      documentID: "doc-1",
      providerEtag: "etag-1",
      resultEntity: { id: "source-1" },
      watchDueAt: store.now()
    }))
  expect("finalizeOperationAndArmWatch", finalized, "committed")
  const identity = watchIdentityOf(finalized.watch)
  expect("armWatch", await measure("armWatch", () => store.armWatch(identity, "manual", { dueAt: store.now() - 1 })), "opened")
  const watch = await measure("getWatch", () => store.getWatch(identity))
  const generation = watch.repairGeneration
  const until = store.now() + 60_000
  expect("claimWatchAttempt", await measure("claimWatchAttempt", () =>
    store.claimWatchAttempt(identity, { generation, until, now: store.now() })), true)
  expect("deferWatch", await measure("deferWatch", () =>
    store.deferWatch(identity, { generation, claimedUntil: until, nextAttemptAt: store.now() - 1 })), true)
  const again = store.now() + 60_001
  expect("claimWatchAttempt", await store.claimWatchAttempt(identity, { generation, until: again, now: store.now() }), true)
  expect("recordVerification", await measure("recordVerification", () =>
    store.recordVerification(identity, {
      generation, claimedUntil: again, fetchedDigest: "not-the-winner", maxAttempts: 5, dueAt: store.now() + 1_000
    })), "pending")

  const failing = await store.claimOperation(claimInput("op-2", "source-2", "doc-2"))
  expect("claimOperation", failing, "claimed")
  expect("recordAttemptFailure", await measure("recordAttemptFailure", () =>
    store.recordAttemptFailure(key("op-2"), { leaseToken: failing.lease.token, kind: "retryable", httpStatus: 503 })), "retrying")
  await measure("listDueOperations", () => store.listDueOperations(store.now()))

  // Two more retries fall due with op-2: a batch of three operations, and the two pending watches.
  for (const id of ["op-3", "op-4"]) {
    const claim = await store.claimOperation(claimInput(id, `source-${id}`, `doc-${id}`))
    await store.recordAttemptFailure(key(id), { leaseToken: claim.lease.token, kind: "retryable", httpStatus: 503 })
  }
  advance(3_600_000)
  const batch = await measure("claimDueOperations (3 due)", () => store.claimDueOperations({ limit: 10 }))
  if (batch.claimed.length !== 3) throw new Error(`claimDueOperations leased ${batch.claimed.length}, expected 3`)
  const watches = await measure("claimDueWatches (2 due)", () =>
    store.claimDueWatches({ now: store.now(), until: store.now() + 60_000, limit: 10 }))
  if (watches.claimed.length !== 2) throw new Error(`claimDueWatches claimed ${watches.claimed.length}, expected 2`)

  // A claim that marks its request sent writes the mark in its own statement: a new key's insert, a takeover's write.
  const sending = { ...claimInput("op-5", "source-5", "doc-5"), markSent: true }
  const sent = await measure("claimOperation (new key, markSent)", () => store.claimOperation(sending))
  if (sent.outcome !== "claimed" || sent.operation.sendMarker !== sent.lease.token) throw new Error("claimOperation with markSent did not mark")
  advance(30_001)
  const retaken = await measure("claimOperation (takeover, markSent)", () => store.claimOperation(sending))
  if (retaken.outcome !== "claimed" || retaken.operation.sendMarker !== retaken.lease.token) throw new Error("a takeover with markSent did not mark")
  return counts
}
