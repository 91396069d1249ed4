import { type PendingAuth, PendingAuthRepository } from "@connector-store/core"
import { Option, Redacted } from "effect"
import type { MemoryDatabase } from "./MemoryDatabase.js"

const TABLE = "pending_auth"

/**
 * A record as kept in memory: the verifier as the text a SQL row holds, so a
 * snapshot compares what is stored. It is wrapped in `Redacted` again the
 * moment it leaves the table.
 */
interface StoredPendingAuth extends Omit<PendingAuth, "codeVerifier"> {
  readonly codeVerifier: string
}

/** The pending-authorization table in memory. */
export const makeMemoryPendingAuthRepository = (db: MemoryDatabase): PendingAuthRepository["Type"] => ({
  insert: (record) =>
    db.write<StoredPendingAuth, boolean>(TABLE, (table) => {
      if (table.has(record.state)) return false
      table.set(record.state, { ...record, scopes: Array.from(record.scopes), codeVerifier: Redacted.value(record.codeVerifier) })
      return true
    }),
  take: (state) =>
    db.write<StoredPendingAuth, Option.Option<PendingAuth>>(TABLE, (table) => {
      const stored = table.get(state)
      if (stored === undefined) return Option.none()
      table.delete(state)
      return Option.some({ ...stored, scopes: Array.from(stored.scopes), codeVerifier: Redacted.make(stored.codeVerifier) })
    }),
  deleteExpiredBefore: (cutoff) =>
    db.write<StoredPendingAuth, number>(TABLE, (table) => {
      let deleted = 0
      for (const [state, record] of table) {
        if (record.expiresAt < cutoff) {
          table.delete(state)
          deleted++
        }
      }
      return deleted
    })
})
