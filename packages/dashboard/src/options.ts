import type { PromiseConnectorStore } from "@connector-store/core"

/** What a request may do: everything, look only, or nothing at all. */
export type DashboardAccess = "admin" | "read-only" | "forbidden"

/** The store calls the dashboard makes: the operator's reads and actions, and the audit log. */
export type DashboardStore = Pick<
  PromiseConnectorStore<unknown>,
  | "getStoreStatus"
  | "listOperations"
  | "listWatches"
  | "listSyncStates"
  | "listRelistRuns"
  | "listProviderLimits"
  | "getOperation"
  | "findOperationByNodeKey"
  | "getWatch"
  | "getRelistRun"
  | "listSweepCandidates"
  | "listGivenUpSweepCandidates"
  | "retryOperation"
  | "settleOperation"
  | "rearmWatch"
  | "releaseSyncLeaseByOperator"
  | "pauseProvider"
  | "resumeProvider"
  | "setProviderLimit"
  | "rearmSweepCandidate"
  | "abandonRelistRun"
  | "recordOperatorAction"
  | "listOperatorActions"
>

/** How a dashboard is mounted and who may do what with it. */
export interface DashboardOptions {
  /** The store the pages read and act on. */
  readonly store: DashboardStore
  /** Where the handler is mounted, e.g. `/ops` (default: the root). Requests outside it answer 404. */
  readonly basePath?: string | undefined
  /**
   * Who the request is: `admin` (may act, when `actions` is on), `read-only`, or `forbidden` (every request refused). Checked on
   * the server for every request, page, asset and action alike. Default: `admin` when `actions` is on, else `read-only`.
   */
  readonly authorize?: ((request: Request) => DashboardAccess | Promise<DashboardAccess>) | undefined
  /** The name the audit log records for a request's actions (default `admin`). */
  readonly actorOf?: ((request: Request) => string | Promise<string>) | undefined
  /** Whether actions exist at all (default `false`: nobody may act, whatever `authorize` answers). */
  readonly actions?: boolean | undefined
  /** How often the overview and the lists refresh while their tab is visible, in ms (default 5000; 0: never). */
  readonly refreshMs?: number | undefined
  /** The clock due filters and ages are read against (default `Date.now`; pass the store's clock). */
  readonly now?: (() => number) | undefined
  /** The largest number of rows one action on a whole filter may touch (default 200, at most 500). */
  readonly maxBulkRows?: number | undefined
  /** How long one status reading is reused by every page that asks within it, in ms (default 2000). */
  readonly statusTtlMs?: number | undefined
}

/** A fetch-style handler: a `Request` in, a `Response` out. */
export type DashboardHandler = (request: Request) => Promise<Response>
