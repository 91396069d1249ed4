// A backlog of due operations in bulk, for the fleet bench: one INSERT …
// SELECT over a generated series (generate_series on Postgres, a recursive
// CTE on SQLite) into a table the store has migrated, each row exactly as
// the store writes it. A due row is an update whose first request was
// refused with a 429: claimed (version 0), marked sent (1), then recorded
// as a retryable failure (2), so it is attempted, unleased, not in doubt,
// one attempt spent, due at a time in the past. With `committedEvery`, all
// but every `committedEvery`-th row are operations the store committed
// instead (marked, finalized: version 2, the committing run's marker kept), so the
// due rows are a slice of a larger table.
//
// Row n (1 … count) has caller `did:bench:device-<n % 16>`, operation
// `due-<n>`, source `source-<n>` and document `document-<n>`: every
// operation writes its own document, so a drain's finalizes never meet on
// a document slot.

/** The one owner every bulk row belongs to. */
export const DUE_OWNER = "did:bench:owner"
/** How many callers (devices) the rows are spread over. */
export const DUE_CALLERS = 16
/** How far in the past the backlog fell due: row n at `now - DUE_SPREAD_MS + n * DUE_SPREAD_MS / (count + 1)`. */
export const DUE_SPREAD_MS = 86_400_000

/** The idempotency key of row `n`. */
export const dueKeyOf = (n) => ({ callerDID: `did:bench:device-${n % DUE_CALLERS}`, operationID: `due-${n}` })

/** The columns every bulk row sets, in the order `selectRows` gives them. */
const COLUMNS = `caller_did, operation_id, node_key, owner_did, connector_name, model, op, account_key, target,
  source_id, deterministic_event_id, payload_hash, reissue_intent, provider_etag, document_id, result_entity, state,
  attempts, next_attempt_at, defer_reason, send_marker, in_doubt_since, last_kind, last_http_status, version,
  incarnation, lease_token, lease_expires_at, created_at, updated_at`

/**
 * The SELECT list of row `n`, given SQL expressions for `now` (epoch ms on
 * the store's clock), a fresh UUID and string concatenation.
 */
const selectRows = ({ n, now, uuid, count, committedEvery }) => {
  const due = committedEvery === undefined ? "TRUE" : `(${n} % ${committedEvery} = 0)`
  const dueAt = `(${now} - ${DUE_SPREAD_MS} + (${n} * ${DUE_SPREAD_MS} / ${count + 1}))`
  return `'did:bench:device-' || (${n} % ${DUE_CALLERS}), 'due-' || ${n}, ${uuid}, '${DUE_OWNER}', 'bench-connector', 'Event',
    'update', 'bench@example.com', 'calendars/primary', 'source-' || ${n}, 'event-due-' || ${n}, 'hash-due-' || ${n},
    '{"kind":"conditional-update","ifMatch":"etag-0"}',
    CASE WHEN ${due} THEN 'etag-0' ELSE 'etag-1' END,
    'document-' || ${n},
    CASE WHEN ${due} THEN NULL ELSE '{"id":"source-' || ${n} || '","summary":"Lunch"}' END,
    CASE WHEN ${due} THEN 'attempted' ELSE 'committed' END,
    1,
    CASE WHEN ${due} THEN ${dueAt} ELSE NULL END,
    NULL,
    CASE WHEN ${due} THEN NULL ELSE ${uuid} END,
    NULL,
    CASE WHEN ${due} THEN 'retryable' ELSE NULL END,
    CASE WHEN ${due} THEN 429 ELSE NULL END,
    2, incarnation, NULL, NULL,
    ${dueAt} - 2000, ${dueAt} - 1000`
}

/**
 * The statement inserting rows 1 … count into `table` on Postgres, due by
 * the server's clock (the store's clock on Postgres). Run it with
 * `session_replication_role = replica`, so the work-notification trigger
 * does not fire per row (nobody listens during a bulk load).
 */
export const pgDueInsert = (table, count, { committedEvery } = {}) =>
  `INSERT INTO ${table} (${COLUMNS})
   SELECT ${selectRows({ n: "n", now: "clock.now", uuid: "gen_random_uuid()::text", count, committedEvery })}
   FROM (SELECT (extract(epoch FROM now()) * 1000)::bigint AS now) AS clock,
     LATERAL (SELECT n, gen_random_uuid()::text AS incarnation FROM generate_series(1::bigint, ${count}) AS n) AS s`

/**
 * The statement inserting `count` settled watches into `table` on
 * Postgres: verified, nothing due, the owner's other entities
 * (`settled-source-<n>`, `settled-document-<n>`), as a store that has been
 * writing back for a while holds them. A drain's finalizes arm watches
 * beside these.
 */
export const pgSettledWatchInsert = (table, count) =>
  `INSERT INTO ${table} (owner_did, connector_name, model, account_key, source_id, document_id, verified_state_digest,
     observed_winner_digest, verification_status, verification_attempts, repair_generation, next_attempt_at, claimed_until,
     defer_reason, version, created_at, updated_at)
   SELECT '${DUE_OWNER}', 'bench-connector', 'Event', 'bench@example.com', 'settled-source-' || n, 'settled-document-' || n,
     'digest-' || n, 'digest-' || n, 'verified', 1, 0, NULL, NULL, NULL, 2, clock.now - 3600000, clock.now - 3600000
   FROM (SELECT (extract(epoch FROM now()) * 1000)::bigint AS now) AS clock, generate_series(1, ${count}) AS n`

/** A version-4-shaped UUID on SQLite, from random bytes. */
const SQLITE_UUID = `lower(hex(randomblob(4)) || '-' || hex(randomblob(2)) || '-4' || substr(hex(randomblob(2)), 2) || '-'
  || substr('89ab', 1 + (abs(random()) % 4), 1) || substr(hex(randomblob(2)), 2) || '-' || hex(randomblob(6)))`

/** The statement inserting rows 1 … count into `table` on SQLite (`better-sqlite3`'s `exec`), due by `now` (the local clock). */
export const sqliteDueInsert = (table, count, now, { committedEvery } = {}) =>
  `WITH RECURSIVE s(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM s WHERE n < ${count}),
     r(n, incarnation) AS (SELECT n, ${SQLITE_UUID} FROM s)
   INSERT INTO ${table} (${COLUMNS})
   SELECT ${selectRows({ n: "n", now: String(now), uuid: SQLITE_UUID, count, committedEvery })} FROM r`

/**
 * Checks that the bulk rows decode as the store's own: `getOperation` of a
 * few of them (first, middle, last, and a committed one when there are
 * some) through `store` answers the fields a store-written row has.
 * Throws on the first difference.
 */
export const checkDueRows = async (store, count, { committedEvery } = {}) => {
  const sample = [...new Set([1, Math.ceil(count / 2), count, ...(committedEvery === undefined ? [] : [committedEvery, committedEvery + 1])])]
    .filter((n) => n >= 1 && n <= count)
  for (const n of sample) {
    const key = dueKeyOf(n)
    const op = await store.getOperation(key)
    const due = committedEvery === undefined || n % committedEvery === 0
    const expected = due
      ? { state: "attempted", attempts: 1, leaseToken: null, sendMarker: null, inDoubtSince: null, lastKind: "retryable", lastHTTPStatus: 429, version: 2 }
      : { state: "committed", attempts: 1, leaseToken: null, nextAttemptAt: null, version: 2, providerEtag: "etag-1" }
    const wrong = op === null
      ? ["the row is missing"]
      : [
        ...Object.entries(expected).filter(([field, value]) => op[field] !== value).map(([field, value]) =>
          `${field} is ${JSON.stringify(op[field])}, expected ${JSON.stringify(value)}`),
        ...(op.reissueIntent?.kind === "conditional-update" ? [] : ["reissueIntent does not decode"]),
        ...(op.sourceID === `source-${n}` && op.documentID === `document-${n}` ? [] : ["sourceID or documentID is wrong"]),
        ...(due && !(op.nextAttemptAt < store.now()) ? [`nextAttemptAt ${op.nextAttemptAt} is not in the past`] : []),
        ...(!due && op.sendMarker === null ? ["a committed row has no marker"] : [])
      ]
    if (wrong.length > 0) throw new Error(`bulk row due-${n} does not read as the store's own: ${wrong.join("; ")}`)
  }
  return sample.length
}
