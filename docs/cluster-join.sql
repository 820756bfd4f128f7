-- cluster-join.sql: brokertrace cluster's join as SQL, for an engine that
-- runs where a fleet's recordings are (DuckDB as written; Spark SQL with
-- the changes in docs/formats.md, "The join in SQL: cluster-join.sql").
--
-- It reads, per recording made with `brokertrace record --format parquet`:
--   DIR/messages.parquet     id, t_in_ns, t_out_ns, in_lport, in_rport,
--                            out_lport, out_rport, copy, ctxsw?, oncpu_ns?
--   DIR/connections.parquet  local_addr, local_port, remote_addr,
--                            remote_port, side
--   DIR/meta.json            sources.peers.status and sources.peers.meta.name
-- where the DIRs are the list in the variable `recordings` (directories, or
-- globs such as 'rec/*' that match only recordings; a recording is
-- identified by the directory its files are in). It defines the view
-- `hops`: exactly the rows of brokertrace cluster's hops.csv, same columns,
-- in the same order.
--
-- DuckDB's CLI:
--   duckdb -c "SET VARIABLE recordings = ['rec/n1', 'rec/n2', 'rec/n3']" \
--          -c ".read docs/cluster-join.sql" \
--          -c "COPY (FROM hops) TO 'hops.csv'"
-- or brokertrace's runner (make deps installs DuckDB for it):
--   node scripts/duckdb-query.mjs --sql docs/cluster-join.sql \
--        --out hops.csv rec/n1 rec/n2 rec/n3
--
-- The join (as cluster/join.go, docs/formats.md): a copy a node wrote to a
-- connection whose far end another recording lists is a hop; a copy
-- written to any other connection the node accepted is a delivery. Each
-- delivery is walked back by the recursive CTE `walk`: the row that read
-- it came from a connection; if another recording holds that connection's
-- far end, the previous hop is that node's row that wrote the same id to
-- it, else the read came from a client and the path is complete. Paths
-- that stop short (an unknown connection, a missing row, a node dialed to
-- an unrecorded one, more than 32 hops: a loop) have no rows, as in Go.

-- The recordings: one row per directory, with the node's name and the
-- recording's place in the list (later ones win where two list the same
-- connection end, as in Go). A recording without the peers source, or two
-- of one node, stop the query as they stop brokertrace cluster.
CREATE OR REPLACE TEMP VIEW bt_nodes AS
WITH meta AS (
  SELECT regexp_replace(filename, '/?meta[.]json$', '') AS dir,
         json_extract_string(content, '$.sources.peers.status') AS status,
         json_extract_string(content, '$.sources.peers.meta.name') AS name
  FROM read_text(list_transform(getvariable('recordings'), d -> rtrim(d, '/') || '/meta.json'))
),
ranked AS (
  SELECT dir, status, name,
         row_number() OVER (ORDER BY list_position(list_transform(getvariable('recordings'), d -> rtrim(d, '/')), dir) NULLS LAST, dir) AS ord,
         count(*) OVER (PARTITION BY name) AS same_name
  FROM meta
)
SELECT dir, ord,
       CASE
         WHEN status IS DISTINCT FROM 'ok' THEN error(dir || ': the recording has no list of connections; record with --peers')
         WHEN same_name > 1 THEN error(dir || ': another recording names its node ' || name || ' too; record each node with --node NAME')
         ELSE name
       END AS name
FROM ranked;

-- Every row of every messages.parquet, with its recording's directory and
-- its place in the file (rn). A recording made with --sched=false has no
-- ctxsw and oncpu_ns: the empty typed row makes them NULL there.
CREATE OR REPLACE TEMP VIEW bt_messages AS
SELECT regexp_replace(filename, '/?messages[.]parquet$', '') AS dir,
       file_row_number AS rn,
       id, t_in_ns, t_out_ns, in_lport, in_rport, out_lport, out_rport, "copy", ctxsw, oncpu_ns
FROM (
  FROM read_parquet(list_transform(getvariable('recordings'), d -> rtrim(d, '/') || '/messages.parquet'),
                    filename = true, file_row_number = true, union_by_name = true)
  UNION ALL BY NAME
  SELECT NULL::STRING AS filename, NULL::BIGINT AS file_row_number, NULL::UBIGINT AS id,
         NULL::BIGINT AS t_in_ns, NULL::BIGINT AS t_out_ns, NULL::USMALLINT AS in_lport,
         NULL::USMALLINT AS in_rport, NULL::USMALLINT AS out_lport, NULL::USMALLINT AS out_rport,
         NULL::UINTEGER AS "copy", NULL::BIGINT AS ctxsw, NULL::BIGINT AS oncpu_ns
  WHERE false
);

-- Every row of every connections.parquet, with its place in the file.
CREATE OR REPLACE TEMP VIEW bt_connections AS
SELECT regexp_replace(filename, '/?connections[.]parquet$', '') AS dir,
       file_row_number AS rn,
       local_addr, local_port, remote_addr, remote_port, side
FROM read_parquet(list_transform(getvariable('recordings'), d -> rtrim(d, '/') || '/connections.parquet'),
                  filename = true, file_row_number = true);

-- From here on plain SQL over bt_nodes, bt_messages and bt_connections.
CREATE OR REPLACE TEMP VIEW hops AS
WITH RECURSIVE
-- A node's connections by their two ports (messages name them so); where
-- two rows share the ports, the last one, as Go's map keeps it.
conn AS (
  SELECT n.ord AS node, c.local_addr, c.local_port, c.remote_addr, c.remote_port, c.side
  FROM (
    SELECT c.*, row_number() OVER (PARTITION BY dir, local_port, remote_port ORDER BY rn DESC) AS k
    FROM bt_connections c
  ) c
  JOIN bt_nodes n ON n.dir = c.dir
  WHERE c.k = 1
),
-- The node that holds a connection end; the last recording where two do.
owner AS (
  SELECT node, local_addr, local_port, remote_addr, remote_port
  FROM (
    SELECT c.*, row_number() OVER (PARTITION BY local_addr, local_port, remote_addr, remote_port ORDER BY node DESC) AS k
    FROM conn c
  ) o
  WHERE k = 1
),
-- Each connection with the node at its far end (NULL where no recording
-- holds it) and the far end's address as Go's netip.AddrPort prints it.
link AS (
  SELECT c.node, c.local_port, c.remote_port, c.side, o.node AS peer,
         CASE WHEN c.remote_addr LIKE '%:%' THEN '[' || c.remote_addr || ']' ELSE c.remote_addr END
           || ':' || CAST(c.remote_port AS STRING) AS remote
  FROM conn c
  LEFT JOIN owner o
    ON o.local_addr = c.remote_addr AND o.local_port = c.remote_port
   AND o.remote_addr = c.local_addr AND o.remote_port = c.local_port
),
-- The rows, numbered by node, with the connection each read from and
-- wrote to.
msg AS (
  SELECT n.ord AS node, m.rn, m.id, m.t_in_ns, m.t_out_ns, m."copy", m.ctxsw, m.oncpu_ns,
         m.in_lport, m.in_rport, m.out_lport, m.out_rport,
         li.side AS in_side, li.peer AS in_peer, li.remote AS in_remote,
         lo.side AS out_side, lo.peer AS out_peer, lo.remote AS out_remote
  FROM bt_messages m
  JOIN bt_nodes n ON n.dir = m.dir
  LEFT JOIN link li ON li.node = n.ord AND li.local_port = m.in_lport AND li.remote_port = m.in_rport
  LEFT JOIN link lo ON lo.node = n.ord AND lo.local_port = m.out_lport AND lo.remote_port = m.out_rport
),
-- The row that wrote an id to a connection to another recorded node: the
-- earliest t_out where two did (then the first in the file).
wrote AS (
  SELECT node, rn, id, out_lport, out_rport
  FROM (
    SELECT node, rn, id, out_lport, out_rport,
           row_number() OVER (PARTITION BY node, id, out_lport, out_rport ORDER BY t_out_ns, rn) AS k
    FROM msg
    WHERE out_peer IS NOT NULL
  ) w
  WHERE k = 1
),
-- Each delivery walked back: one row per hop, back = 1 at the delivery.
walk (dnode, drn, back, node, rn) AS (
  SELECT node, rn, 1, node, rn
  FROM msg
  WHERE out_side = 'accepted' AND out_peer IS NULL
  UNION ALL
  SELECT w.dnode, w.drn, w.back + 1, p.node, p.rn
  FROM walk w
  JOIN msg m ON m.node = w.node AND m.rn = w.rn
  JOIN wrote p ON p.node = m.in_peer AND p.id = m.id
              AND p.out_lport = m.in_rport AND p.out_rport = m.in_lport
  WHERE w.back < 32 -- a longer path is a loop (Go: maxHops)
),
-- The deliveries whose walk reached a row read from a client.
path AS (
  SELECT w.dnode, w.drn, w.back AS hops
  FROM walk w
  JOIN msg m ON m.node = w.node AND m.rn = w.rn
  WHERE m.in_peer IS NULL AND m.in_side = 'accepted'
),
-- Numbered per id in the order their last hop's copy left the cluster.
numbered AS (
  SELECT p.dnode, p.drn, p.hops,
         row_number() OVER (PARTITION BY m.id ORDER BY m.t_out_ns, p.dnode, p.drn) AS delivery
  FROM path p
  JOIN msg m ON m.node = p.dnode AND m.rn = p.drn
),
hop AS (
  SELECT m.id, d.delivery, d.hops - w.back + 1 AS hop, d.hops, m.node, m.in_remote, m.out_remote,
         m.t_in_ns, m.t_out_ns, m.ctxsw, m.oncpu_ns, m."copy", w.dnode, w.drn
  FROM numbered d
  JOIN walk w ON w.dnode = d.dnode AND w.drn = d.drn
  JOIN msg m ON m.node = w.node AND m.rn = w.rn
),
row_of AS (
  SELECT h.*,
         lag(node) OVER (PARTITION BY dnode, drn ORDER BY hop) AS prev_node,
         lag(t_out_ns) OVER (PARTITION BY dnode, drn ORDER BY hop) AS prev_out,
         lead(node) OVER (PARTITION BY dnode, drn ORDER BY hop) AS next_node
  FROM hop h
)
SELECT r.id,
       CAST(r.delivery AS UINTEGER) AS delivery,
       CAST(r.hop AS UTINYINT) AS hop,
       CAST(r.hops AS UTINYINT) AS hops,
       n.name AS node,
       CASE WHEN r.hop = 1 THEN 'client:' || r.in_remote ELSE pn.name END AS "from",
       CASE WHEN r.hop = r.hops THEN 'client:' || r.out_remote ELSE nn.name END AS "to",
       r.t_in_ns,
       r.t_out_ns,
       r.t_out_ns - r.t_in_ns AS latency_ns,
       r.t_in_ns - r.prev_out AS net_ns,
       r.ctxsw,
       r.oncpu_ns,
       r."copy"
FROM row_of r
JOIN bt_nodes n ON n.ord = r.node
LEFT JOIN bt_nodes pn ON pn.ord = r.prev_node
LEFT JOIN bt_nodes nn ON nn.ord = r.next_node
ORDER BY r.id, r.delivery, r.hop;
