-- Archival candidates of a search, read with their repeats visible in a
-- scope, in one round trip (pkg/memory/cluster, search.go).
--
-- ARGV[1]  key prefix, "hpcq:{<run>}:"
-- ARGV[2]  JSON: {scope = {{branch, max_seq}, ...}, seqs = {seq, ...}}
--
-- Returns, for each seq in order: the item (items hash; false when Redis
-- does not have it), the number of its repeats visible in the scope, and
-- the latest time (ms) of those (0 without any).
--
-- A repeat is visible when its branch is in the scope and its seq is at
-- most that entry's max_seq. hits:<seq> holds every repeat of the item; a
-- fact many nodes wrote again has thousands, and a scope (the path to the
-- root) names a few branches: past as many repeats as the scope has
-- branches, the repeats are read by branch instead, one per scope entry,
-- from hitb:<seq>:<branch>, whose members carry the running count and the
-- latest time of the branch's repeats up to each ("seq:count:last_ms").
local p = ARGV[1]
local req = cjson.decode(ARGV[2])
local bound, branches = {}, 0
for _, e in ipairs(req.scope) do
  if bound[e[1]] == nil then
    branches = branches + 1
  end
  bound[e[1]] = e[2]
end
local out = {}
for _, seq in ipairs(req.seqs) do
  local item = redis.call('HGET', p .. 'items', seq)
  local count, last = 0, 0
  local n = redis.call('ZCARD', p .. 'hits:' .. seq)
  if n > 0 and n <= branches then
    for _, m in ipairs(redis.call('ZRANGE', p .. 'hits:' .. seq, 0, -1)) do
      local s, b, ts = string.match(m, '^(%d+)|(.*)|(%d+)$')
      local mx = b and bound[b]
      if mx and tonumber(s) <= mx then
        count = count + 1
        last = math.max(last, tonumber(ts))
      end
    end
  elseif n > 0 then
    for b, mx in pairs(bound) do
      local top = redis.call('ZREVRANGEBYSCORE', p .. 'hitb:' .. seq .. ':' .. b, mx, '-inf', 'LIMIT', 0, 1)
      if top[1] then
        local c, l = string.match(top[1], '^%d+:(%d+):(%d+)$')
        count = count + tonumber(c)
        last = math.max(last, tonumber(l))
      end
    end
  end
  out[#out + 1] = item or false
  out[#out + 1] = count
  out[#out + 1] = last
end
return out
