import type { ServerHistory } from "../ports/ServerHistory.js"
import { StoreMetrics } from "./metrics.js"

/** Counts one claim the failover put in doubt: on `history`, and in `StoreMetrics.failoverDoubtfulClaims`. */
export const countDoubtfulClaim = (history: ServerHistory["Type"]): void => {
  history.countDoubtful(1)
  StoreMetrics.failoverDoubtfulClaims.unsafeUpdate(1, [])
}
