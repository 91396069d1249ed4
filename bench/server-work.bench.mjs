// The Postgres server's work per operation lifecycle (claimOperation with
// markSent of a new key → finalizeOperationAndArmWatch), counted on the
// server, not timed: rows written per table (HOT updates apart), index
// tuples read, WAL records and bytes of the store's tables (pg_walinspect,
// which the bench's scratch database creates; other databases' WAL left
// out), and the CPU of the store's backends (/proc, when the server is on
// this machine). See support/server-work.mjs. The figures of a change to
// the schema or the statements are compared here, before and after.
import { scratchPostgres } from "./support/databases.mjs"
import { printServerWork, serverWork } from "./support/server-work.mjs"

const LIFECYCLES = 1_000

const serverWorkCase = async (context) => {
  if (context.postgres.skip !== undefined) return { skip: context.postgres.skip }
  const lines = []
  for (const workers of [1, 8]) {
    const result = await serverWork({ url: context.postgres.url, prefix: `sw${workers}_`, n: LIFECYCLES, workers, warm: 300 })
    lines.push(...printServerWork(`  ${workers} runner${workers === 1 ? "" : "s"}`, result).split("\n"))
  }
  return lines
}

export default {
  title: "the Postgres server's work per operation lifecycle (claim with markSent → finalize and arm)",
  before: async () => ({ postgres: await scratchPostgres() }),
  after: async (context) => {
    await context.postgres.drop?.()
  },
  cases: [{ name: `postgres · ${LIFECYCLES.toLocaleString("en-US")} lifecycles, 1 and 8 runners`, run: serverWorkCase }]
}
