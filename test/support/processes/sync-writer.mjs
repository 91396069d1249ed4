// A separate OS process (its own SQLite connection) writing one sync state in
// the SQLite file argv[2], fenced by the sync lease. argv[3] is its part:
// "stale" writes with the lease token argv[7]; "take" first claims the lease
// at the instant argv[7] (a takeover once the old lease expired) and writes
// with the token it got, once the stale holder has landed 3 progress writes. Once all argv[5] parties are ready (argv[4] is this
// one's index) it makes argv[6] writes, alternating fenced progress writes
// (appending its tag to the checkpoint's log) and fenced reports, and prints
// `{ token, outcomes }`: "landed" or "lost" (SyncLeaseLost) per write.
import { existsSync, writeFileSync } from "node:fs"
import { openConnectorStore } from "@connector-store/sql-adapter"

const [file, part, indexArg, partiesArg, callsArg, arg] = process.argv.slice(2)
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms))
const C = "gcal"
const O = "did:owner:1"

const store = await openConnectorStore({ url: file, busyTimeoutMs: 30_000 })
writeFileSync(`${file}.ready-${indexArg}`, "")
while (!Array.from({ length: Number(partiesArg) }, (_, k) => existsSync(`${file}.ready-${k}`)).every(Boolean)) await sleep(2)

let token = arg
if (part === "take") {
  // Not before the stale holder has landed 3 progress writes, so the takeover lands in the middle of its run.
  while (((await store.getSyncState(C, O))?.version ?? 0) < 3) await sleep(1)
  const claim = await store.claimSyncLease(C, O, { now: Number(arg), leaseMs: 60_000 })
  if (claim.outcome !== "claimed") throw new Error(`takeover refused: ${JSON.stringify(claim)}`)
  token = claim.lease.token
}
const outcomes = []
for (let i = 0; i < Number(callsArg); i++) {
  const tag = `${part}-${i}`
  const write = i % 2 === 0
    ? store.updateSyncProgress(C, O, (current) => ({ checkpoint: { log: [...(current?.checkpoint?.log ?? []), tag] }, recovery: null }), {
      leaseToken: token,
      maxRetries: 1_000
    })
    : store.setSyncState(C, O, { status: "syncing", lastSyncedAt: tag, entityCount: i }, { leaseToken: token })
  outcomes.push(await write.then(() => "landed", (error) => {
    if (error?._tag === "SyncLeaseLost") return "lost"
    throw error
  }))
}
await store.close()
process.stdout.write(JSON.stringify({ token, outcomes }))
