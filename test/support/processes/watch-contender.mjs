// A separate OS process (its own SQLite connection) racing others on one
// watch in the SQLite file argv[2]. Once every one of argv[3] contenders has
// opened its store (a ready file each, argv[4] is this one's index), it makes
// argv[5] read-decide-write calls of mixed kinds, each holding the write lock
// a moment while its winner is read, and prints a tally of what it did as JSON.
import { existsSync, writeFileSync } from "node:fs"
import { openConnectorStore } from "@connector-store/sql-adapter"

const [file, contendersArg, indexArg, callsArg, identityArg] = process.argv.slice(2)
const contenders = Number(contendersArg)
const index = Number(indexArg)
const identity = JSON.parse(identityArg)
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms))

let winner = `w-${index}-0`
const store = await openConnectorStore({
  url: file,
  readWinner: async () => {
    await sleep(1)
    return winner
  },
  busyTimeoutMs: 30_000
})

writeFileSync(`${file}.ready-${index}`, "")
while (!Array.from({ length: contenders }, (_, k) => existsSync(`${file}.ready-${k}`)).every(Boolean)) await sleep(5)

const tally = { writes: 0, opened: 0, kinds: { manual: 0, ingress: 0, claim: 0, verify: 0 }, startedAt: Date.now(), endedAt: 0 }
const wrote = (kind, yes, opened = false) => {
  if (!yes) return
  tally.writes++
  tally.kinds[kind]++
  if (opened) tally.opened++
}
for (let i = 0; i < Number(callsArg); i++) {
  switch ((i + index) % 4) {
    case 0: {
      const outcome = await store.armWatch(identity, "manual", { dueAt: 0 })
      wrote("manual", outcome !== "noop", outcome === "opened")
      break
    }
    case 1: {
      winner = `w-${index}-${i}`
      const outcome = await store.armWatch(identity, "ingress", { dueAt: 0, triggeringWinner: winner })
      wrote("ingress", outcome !== "noop", outcome === "opened")
      break
    }
    case 2: {
      const seen = await store.getWatch(identity)
      const now = Date.now()
      wrote("claim", await store.claimWatchAttempt(identity, { generation: seen.repairGeneration, until: now + 2, now }))
      break
    }
    default: {
      const seen = await store.getWatch(identity)
      const outcome = await store.recordVerification(identity, {
        generation: seen.repairGeneration,
        claimedUntil: seen.claimedUntil,
        fetchedDigest: i % 3 === 0 ? winner : "stale",
        maxAttempts: 3,
        dueAt: 0
      })
      wrote("verify", outcome !== "stale-generation" && outcome !== "stale-claim")
    }
  }
}
tally.endedAt = Date.now()
await store.close()
process.stdout.write(JSON.stringify(tally))
