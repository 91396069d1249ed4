import { openConnectorStore, type SqlConnectorStore } from "@connector-store/sql-adapter"
import type { Connector } from "@connector-store/worker"
import { proxy } from "../../soak/cluster.mjs"
import { editOf, type EventLedger, writeBack, type WriteBackEnd } from "./failoverLedger.js"

// What the real failover tests share: the store they open on each server, the write-back loops, the runners that die
// with the primary, and the one address in front of whichever server is primary.

export const PREFIX = "failover_"
export const WATCH_DUE_IN_MS = 3_600_000
/** Edits committed while the replica keeps up, then while it is cut off (or still keeping up), then in flight at the crash. */
export const BEFORE = 60
export const DURING = 60
export const IN_FLIGHT = 10
export const LOOPS = 4

export const range = (from: number, to: number) => Array.from({ length: to - from + 1 }, (_, i) => from + i)

export const open = (url: string, failoverDoubtMs?: number) =>
  openConnectorStore({
    url,
    tablePrefix: PREFIX,
    readWinner: () => null,
    callTimeoutMs: 3_000,
    connectTimeoutMs: 2_000,
    maxConnections: LOOPS,
    failoverDoubtMs
  })

/** `ns` driven by `LOOPS` write-back loops at once; what each ended with, by edit. */
export const drive = async (store: SqlConnectorStore, ns: ReadonlyArray<number>, ledger: EventLedger) => {
  const ends = new Map<number, WriteBackEnd>()
  const queue = [...ns]
  await Promise.all(Array.from({ length: LOOPS }, async () => {
    for (let n = queue.shift(); n !== undefined; n = queue.shift()) {
      ends.set(n, await writeBack(store, editOf(n), ledger, store.now() + WATCH_DUE_IN_MS))
    }
  }))
  return ends
}

/** How long the leases of the runners that die with the primary last: the ones coming back wait that long for them. */
export const DYING_LEASE_MS = 500

/** Edits claimed and sent, their answer never recorded: the runner died with the primary. Answers when their leases end. */
export const sendWithoutFinalize = async (store: SqlConnectorStore, ns: ReadonlyArray<number>, ledger: EventLedger) => {
  let leasesEnd = 0
  for (const n of ns) {
    const edit = editOf(n)
    const claim = await store.claimOperation({ ...edit, markSent: true, leaseMs: DYING_LEASE_MS })
    if (claim.outcome !== "claimed") throw new Error(`edit ${n} was not claimed: ${claim.outcome}`)
    leasesEnd = Math.max(leasesEnd, claim.lease.expiresAt)
    ledger.update(edit.sourceID!, edit.operationID)
  }
  return leasesEnd
}

/**
 * One address in front of whichever server is primary (a virtual IP, a DNS name, a managed endpoint): `switchTo` sends
 * new connections to another server and closes the open ones, as a failover of such an address does (the soak's proxy).
 */
export const floatingAddress = async (port: number) => {
  const address = await proxy(port)
  return { url: `postgres://postgres@127.0.0.1:${address.port}/postgres`, switchTo: address.switchTo, close: address.close }
}

/** A connector of the worker over `ledger`: a conditional re-send refused 412 when another write landed, looked up by etag. */
export const ledgerConnector = (ledger: EventLedger): Connector => ({
  send: async (operation, { reissue }) => {
    const ifMatch = reissue?.kind === "conditional-update" ? reissue.ifMatch : undefined
    const sent = ledger.update(operation.sourceID!, operation.operationID, ifMatch)
    if (sent.status === 412) throw Object.assign(new Error("precondition failed"), { status: 412 })
    return { id: operation.sourceID!, etag: sent.etag, digest: operation.payloadHash }
  },
  lookup: async (operation) => {
    const etag = ledger.lookup(operation.sourceID!)
    return { id: operation.sourceID!, etag, digest: etag === `etag-${operation.operationID}` ? operation.payloadHash : `other:${etag}` }
  }
})
