-- One write of pkg/memory/cluster, applied atomically: every op of the
-- request gets the next run-wide seq, or (on a validation error) none does.
--
-- ARGV[1]  key prefix, "hpcq:{<run>}:" (one hash tag: one cluster slot)
-- ARGV[2]  write id: a replay of an applied write returns its first result
-- ARGV[3]  request JSON: {ts = ms, scope = {{branch, max_seq}, ...}, ops = {...}}
--          (the writer's scope, sent only when an op needs it: archival dedup)
--
-- Keys under the prefix:
--   seq                 the run's last seq
--   branch:<id>         hash parent, fork_seq, depth, created_ms
--   core:<branch>       zset seq -> {s, k, v, i, e, d, ts}
--   recall:<branch>     zset seq -> {s, ts, k, n, ph, pl}
--   sum:<branch>        zset seq -> {s, tx, f}
--   facts:<branch>      hash fact hash -> seq of the first item of that fact in the branch
--   items               hash seq -> archival item {s, b, tx, tg, c, f, ep, ts}
--   hits:<target seq>   zset seq -> "seq|branch|ts" (repeats of an archival item)
--   hitb:<target seq>:<branch>
--                       zset seq -> "seq:count:last_ms": the same repeats by branch, each
--                       with the count and the latest time of the branch's repeats up to it
--                       (a search counts the repeats visible in a scope with one read per
--                       scope entry: items.lua)
--   dl:<branch>         zset seq -> "seq:count:length" (the branch's archival texts up to seq
--                       and their total length in terms: BM25 statistics of any scope)
--   t:<branch>:<term>   string of "seq:tf:length " entries in seq order: the postings of term
--                       in the branch's archival texts, the term index archival search reads
--                       (APPEND: a few bytes and O(1) per posting; a replay never appends
--                       twice, as the write id answers it first)
--   index               "2" once the run's term index and repeats by branch are kept here
--                       (Open builds them for runs written before: buildIndex)
--   applied:<write id>  the result of an applied write, kept 7 days
local p = ARGV[1]
local done = redis.call('GET', p .. 'applied:' .. ARGV[2])
if done then
  return done
end
local req = cjson.decode(ARGV[3])

-- Validate everything before writing anything.
for i, op in ipairs(req.ops) do
  if op.t == 'fork' then
    if redis.call('EXISTS', p .. 'branch:' .. op.b) == 1 then
      return cjson.encode({err = 'exists', op = i})
    end
    if op.parent ~= '' and redis.call('EXISTS', p .. 'branch:' .. op.parent) == 0 then
      return cjson.encode({err = 'noparent', op = i})
    end
  elseif redis.call('EXISTS', p .. 'branch:' .. op.b) == 0 then
    return cjson.encode({err = 'nobranch', op = i})
  end
end

local out = {}
for i, op in ipairs(req.ops) do
  local seq = redis.call('INCR', p .. 'seq')
  local r = {s = seq}
  if op.t == 'fork' then
    local depth = 0
    if op.parent ~= '' then
      depth = tonumber(redis.call('HGET', p .. 'branch:' .. op.parent, 'depth')) + 1
    end
    redis.call('HSET', p .. 'branch:' .. op.b, 'parent', op.parent, 'fork_seq', seq, 'depth', depth, 'created_ms', req.ts)
    r.depth = depth
  elseif op.t == 'core' then
    redis.call('ZADD', p .. 'core:' .. op.b, seq,
      cjson.encode({s = seq, k = op.k, v = op.v, i = op.i, e = op.e, d = op.d, ts = req.ts}))
  elseif op.t == 'recall' then
    redis.call('ZADD', p .. 'recall:' .. op.b, seq,
      cjson.encode({s = seq, ts = op.ts, k = op.kind, n = op.node, ph = op.phase, pl = op.payload}))
  elseif op.t == 'sum' then
    redis.call('ZADD', p .. 'sum:' .. op.b, seq, cjson.encode({s = seq, tx = op.text, f = op.folded}))
  elseif op.t == 'arch' then
    local found = nil
    for _, e in ipairs(req.scope or {}) do
      local v = redis.call('HGET', p .. 'facts:' .. e[1], op.fact)
      if v and tonumber(v) <= e[2] then
        found = v
        break
      end
    end
    if found then
      -- A repeat of a visible fact: recorded against the stored item.
      redis.call('ZADD', p .. 'hits:' .. found, seq, seq .. '|' .. op.b .. '|' .. req.ts)
      local bk = p .. 'hitb:' .. found .. ':' .. op.b
      local count, last = 0, 0
      local top = redis.call('ZREVRANGE', bk, 0, 0)
      if top[1] then
        local c, l = string.match(top[1], '^%d+:(%d+):(%d+)$')
        count, last = tonumber(c), tonumber(l)
      end
      redis.call('ZADD', bk, seq, seq .. ':' .. (count + 1) .. ':' .. string.format('%d', math.max(last, req.ts)))
      r.dup = tonumber(found)
    else
      redis.call('HSET', p .. 'facts:' .. op.b, op.fact, seq)
      local n, l = 0, 0
      local last = redis.call('ZREVRANGE', p .. 'dl:' .. op.b, 0, 0)
      if last[1] then
        local a, b = string.match(last[1], '^%d+:(%d+):(%d+)$')
        n, l = tonumber(a), tonumber(b)
      end
      redis.call('ZADD', p .. 'dl:' .. op.b, seq, seq .. ':' .. (n + 1) .. ':' .. (l + op.len))
      for term, tf in pairs(op.tm or {}) do
        redis.call('APPEND', p .. 't:' .. op.b .. ':' .. term, seq .. ':' .. tf .. ':' .. op.len .. ' ')
      end
      redis.call('HSET', p .. 'items', seq,
        cjson.encode({s = seq, b = op.b, tx = op.text, tg = op.tags, c = op.ctx, f = op.fact, ep = op.ep, ts = req.ts}))
    end
  end
  out[i] = r
end
local res = cjson.encode({r = out})
redis.call('SET', p .. 'applied:' .. ARGV[2], res, 'EX', 604800)
return res
