import { Context, type Effect } from "effect"
import type { PersistenceError } from "../errors.js"
import type { FailoverDoubt } from "../operation/failover.js"
import type { NoticedFailover, StoreDurability } from "../operator/durability.js"
import type { Millis } from "../watch/ProjectionWatch.js"

/** What `endFailoverDoubt` did: `ended` (claims from now on are decided as usual), or `none` (no window was in force). */
export type EndFailoverDoubtResult =
  | { readonly outcome: "ended"; readonly failover: NoticedFailover }
  | { readonly outcome: "none" }

/**
 * The adapter's record of which server it writes to (see `StoreDurability`); optional, read with `serviceOption`: a store
 * without one hands out no claim in failover doubt and reports its durability as unknown.
 */
export class ServerHistory extends Context.Tag("@connector-store/core/ServerHistory")<ServerHistory, {
  /** The failover doubt a claim at `now` is decided under, from what the adapter last noticed or read (no I/O). */
  readonly doubtAt: (now: Millis) => FailoverDoubt | undefined
  /** Counts `n` claims handed out in doubt because of the failover noticed. */
  readonly countDoubtful: (n: number) => void
  /** The durability report, read now. */
  readonly report: Effect.Effect<StoreDurability, PersistenceError>
  /** Ends the window in force at `now` on behalf of `by`: claims after it are decided as if no failover had been noticed. */
  readonly endDoubt: (by: string, now: Millis) => Effect.Effect<EndFailoverDoubtResult, PersistenceError>
}>() {}
