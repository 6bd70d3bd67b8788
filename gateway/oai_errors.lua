-- Turns gRPC errors into OpenAI-shaped HTTP answers for REST clients (Anthropic-shaped ones
-- on the Message Batches routes, /v1/messages/...).
-- A service aborts with trailing metadata `x-oai-status` (HTTP status) and `x-oai-error`
-- (the JSON body); this filter, placed before the transcoder, rewrites the response.
-- On the way in it hands a REST request's query string to the services as the `x-oai-query`
-- header, so the transcoder binds path parameters only: the services decode the query
-- against the request message themselves (services/common/rest_input.py), with OpenAI's
-- error wording, where the transcoder would answer in its own words.
-- On the Message Batches routes it also passes the request's own scheme and Host as
-- `x-bg-origin`, so a batch's `results_url` can point back at this gateway.
-- Requests that arrived as native gRPC are left alone (their clients read the gRPC status).
-- A HEAD runs as the GET it mirrors; this filter sends that answer's status and headers only.
-- A body may come gzip-compressed (`Content-Encoding: gzip`, inflated by Envoy's decompressor
-- filter); any other coding is 415 `unsupported_content_encoding`.
-- MAX_JSON_BODY_BYTES, MAX_MESSAGE_BATCH_BYTES and the *_MESSAGE texts are defined by
-- gateway/render.py above this text.

local function json_string(s)
  s = string.gsub(s, '[%c"\\]', function(c) return string.format("\\u%04x", string.byte(c)) end)
  return '"' .. s .. '"'
end

local function envelope(message, error_type, code)
  return '{"error":{"message":' .. json_string(message) .. ',"type":"' .. error_type ..
    '","param":null,"code":"' .. code .. '"}}'
end

-- Anthropic's error types by HTTP status (services/common/translate/errors.py).
local ANTHROPIC_TYPES = {["400"] = "invalid_request_error", ["401"] = "authentication_error",
  ["402"] = "billing_error", ["403"] = "permission_error", ["404"] = "not_found_error",
  ["409"] = "conflict_error", ["413"] = "request_too_large", ["429"] = "rate_limit_error",
  ["500"] = "api_error", ["504"] = "timeout_error", ["529"] = "overloaded_error"}

local function anthropic_envelope(status, message)
  local error_type = ANTHROPIC_TYPES[status]
  if error_type == nil then
    if tonumber(status) < 500 then error_type = "invalid_request_error" else error_type = "api_error" end
  end
  return '{"type":"error","error":{"type":"' .. error_type .. '","message":' .. json_string(message) .. '}}'
end

local function is_anthropic_path(path)
  return path == "/v1/messages" or string.sub(path, 1, 13) == "/v1/messages/"
end

local function is_anthropic(handle)
  local md = handle:streamInfo():dynamicMetadata():get("oai")
  return md ~= nil and md["anthropic"] == "1"
end

local function is_upload(headers)
  local path = string.match(headers:get(":path") or "", "^[^?]*")
  return headers:get(":method") == "POST" and (path == "/v1/files" or path == "/v1/files/")
end

-- `grpc_shaped`: Envoy takes the request for gRPC (grpc_codec) and sends its local replies to it in
-- gRPC's shape (HTTP 200, the body as grpc-message); the status and body kept in the metadata
-- let the response side answer as REST.
local function refuse(request_handle, status, message, code, grpc_shaped)
  local body = envelope(message, "invalid_request_error", code)
  if is_anthropic(request_handle) then body = anthropic_envelope(status, message) end
  -- local_reply_config passes the body through on this mark; dynamic metadata, which no client
  -- can set (a request header `x-oai-local-reply` had let one strip the envelope off Envoy's 404).
  local md = request_handle:streamInfo():dynamicMetadata()
  md:set("oai", "local_reply", "1")
  if grpc_shaped then
    md:set("oai", "rest_status", status)
    md:set("oai", "rest_body", body)
  end
  request_handle:respond({[":status"] = status, ["content-type"] = "application/json"}, body)
end

-- What Envoy's transcoder and router take for gRPC: `application/grpc` exactly or followed by `+`.
-- A type that merely starts so (`application/grpc-web`, `application/grpcx`, `application/grpc;...`)
-- is transcoded as REST and gets REST's checks and envelope: taken for gRPC here, it had been a 400
-- with no body and the internal headers (grpc-status, x-oai-status, x-oai-error) in sight. Of
-- Envoy's gRPC, gRPC's own codecs (`+proto`, `+json`, with parameters or not) are native calls;
-- another (`+xml`) reaches no route as gRPC and had come back a 500: "foreign", refused here.
local function grpc_codec(ct)
  if ct == "application/grpc" then return "native" end
  if string.sub(ct, 1, 17) ~= "application/grpc+" then return nil end
  local codec = string.match(ct, "^application/grpc%+([^;%s]*)")
  if codec == "proto" or codec == "json" then return "native" end
  return "foreign"
end

-- Request side: remember native gRPC calls; move the query string to `x-oai-query`; refuse
-- bodies on GET, HEAD and DELETE (nothing would read them) and JSON bodies above the limit before
-- they are transcoded (uploads stream and are capped by the ingest service itself).
-- The services trust `x-oai-query`, `x-oai-gzip` and `x-bg-origin`, Envoy's span `x-oai-method`:
-- a client's own copies are dropped before this filter sets its own.
function envoy_on_request(request_handle)
  local h = request_handle:headers()
  local ct = h:get("content-type") or ""
  local grpc = grpc_codec(ct)
  if grpc == "native" then
    request_handle:streamInfo():dynamicMetadata():set("oai", "native_grpc", "1")
    return
  end
  h:remove("x-oai-query")
  h:remove("x-bg-origin")
  -- The method as the client sent it, for Envoy's span (tracing.py): the transcoder makes
  -- every call a POST before the span reads the request's headers.
  h:replace("x-oai-method", h:get(":method") or "")
  local bare, query = string.match(h:get(":path") or "", "^([^?]*)%?(.*)$")
  if bare ~= nil then
    h:replace(":path", bare)
    if query ~= "" then h:add("x-oai-query", query) end
  end
  if is_anthropic_path(bare or h:get(":path") or "") then
    request_handle:streamInfo():dynamicMetadata():set("oai", "anthropic", "1")
    local scheme = h:get("x-forwarded-proto") or h:get(":scheme") or "http"
    h:add("x-bg-origin", scheme .. "://" .. (h:get(":authority") or ""))
  end
  if grpc == "foreign" then
    refuse(request_handle, "400", "Content-Type '" .. string.sub(ct, 1, 60) ..
      "' is neither JSON nor a gRPC codec this gateway speaks; send JSON with " ..
      "'Content-Type: application/json'.", "invalid_content_type", true)
    return
  end
  -- gzip bodies are inflated by the decompressor filter after this one; another coding would
  -- reach the transcoder as is and read as broken JSON.
  local coding = string.lower(string.match(h:get("content-encoding") or "", "^%s*(.-)%s*$"))
  if coding ~= "" and coding ~= "gzip" and coding ~= "identity" then
    refuse(request_handle, "415", "Content-Encoding '" .. string.sub(coding, 1, 40) ..
      "' is not supported; send the body as is or gzip-compressed.", "unsupported_content_encoding")
    return
  end
  local method = h:get(":method")
  local length = tonumber(h:get("content-length") or "")
  local bodiless = method == "GET" or method == "HEAD" or method == "DELETE"
  local has_body = length ~= nil and length > 0
  if length == nil and bodiless then
    -- No Content-Length: no body, or a chunked one (Envoy's HTTP/1 codec drops the
    -- Transfer-Encoding header) or an HTTP/2 one. body() answers at once when the headers ended
    -- the request (the usual GET); a body it reads whole, to refuse it as with a Content-Length.
    local body = request_handle:body()
    has_body = body ~= nil and body:length() > 0
    h = request_handle:headers()  -- the wrapper taken before the wait is dead after it
  end
  h:remove("x-oai-gzip")
  -- The mark makes the service refuse a gzip body that inflated to nothing; without a length the
  -- body may be there (chunked), and without the mark a non-gzip one read as empty and ran.
  if coding == "gzip" and (has_body or (length == nil and not bodiless)) then
    h:add("x-oai-gzip", "1")  -- rest_input.GZIP_METADATA_KEY
  end
  if bodiless and has_body then
    refuse(request_handle, "400", method .. " requests take no body; pass parameters in the query string.",
      "body_not_allowed")
    return
  end
  -- HEAD is GET without the body (RFC 9110): routed as GET (the transcoder knows GET routes
  -- only); the response side drops the body the GET answers with (drop_body).
  if method == "HEAD" then
    h:replace(":method", "GET")
    request_handle:streamInfo():dynamicMetadata():set("oai", "head", "1")
  end
  -- A body without a length (chunked) is counted as it arrives: the `body_limit` filter after
  -- this one holds it up to the route's limit, 413 beyond (envoy.yaml.tmpl).
  local unknown_length = length == nil and not bodiless
  if is_anthropic(request_handle) then
    if length ~= nil and length > MAX_MESSAGE_BATCH_BYTES then
      refuse(request_handle, "413", string.format("The request body is %d bytes; the limit is %d bytes.",
        length, MAX_MESSAGE_BATCH_BYTES), "request_too_large")
    elseif unknown_length then
      request_handle:streamInfo():dynamicMetadata():set("oai", "body_limit", "message_batch")
    end
    return
  end
  if unknown_length then
    if not is_upload(h) then
      request_handle:streamInfo():dynamicMetadata():set("oai", "body_limit", "json")
    end
  elseif length ~= nil and length > MAX_JSON_BODY_BYTES and not is_upload(h) then
    refuse(request_handle, "413", string.format(
      "The request body is %d bytes; the limit is %d bytes. Upload large inputs with POST /v1/files.",
      length, MAX_JSON_BODY_BYTES), "request_too_large")
  end
end

-- A 5xx without the API's envelope, in the words and codes of Envoy's own 5xx (local_reply_config
-- in envoy.yaml.tmpl): its grpc-message is a library's or an uncaught exception's text ("Unexpected
-- <class ...>"), nothing a client can act on. Anthropic's 503 is 529 overloaded_error, as the
-- services answer it (services/common/anthropic_errors.py).
local function server_failure(status, anthropic)
  local message, code = SERVER_ERROR_MESSAGE, "server_error"
  if status == 503 then
    message, code = UNAVAILABLE_MESSAGE, "service_unavailable"
    if anthropic then status = 529 end
  elseif status == 504 then
    message, code = TIMEOUT_MESSAGE, "service_timeout"
  end
  if anthropic then return tostring(status), anthropic_envelope(tostring(status), message) end
  return tostring(status), envelope(message, "server_error", code)
end

-- gRPC errors that carry no OpenAI body (raised by the gRPC library, not by our handlers).
local function fallback(h, grpc_status, anthropic)
  local message = string.gsub(h:get("grpc-message") or "", "%%(%x%x)",
    function(hex) return string.char(tonumber(hex, 16)) end)
  if grpc_status == "8" and string.find(message, "larger than max", 1, true) then
    if anthropic then return "413", anthropic_envelope("413", "The request is too large: " .. message) end
    return "413", envelope("The request is too large: " .. message, "invalid_request_error", "request_too_large")
  end
  local status = tonumber(h:get(":status") or "500") or 500
  if status < 400 or status >= 500 or grpc_status == "2" then  -- UNKNOWN is always the server's failure
    if status < 500 then status = 500 end
    return server_failure(status, anthropic)
  end
  if anthropic then return tostring(status), anthropic_envelope(tostring(status), message) end
  local error_type = "invalid_request_error"
  if status == 429 then error_type = "rate_limit_error" end
  return tostring(status), envelope(message, error_type, "grpc_status_" .. grpc_status)
end

-- A HEAD's answer: the GET's status and headers (Content-Length included), none of its body. Envoy
-- drops only the body of its own replies to a HEAD; the one the GET route answers with it sends
-- as is, past the framing the client expects (no body): the connection's next answer was read
-- from the middle of it ("illegal status line"). Each chunk is emptied as it passes, nothing is
-- held (a download streams 200 MB), and the codec frames none for a HEAD (no chunk sizes, no
-- last chunk). Setting a chunk also sets Content-Length, on headers already sent by then.
local function drop_body(response_handle)
  for chunk in response_handle:bodyChunks() do chunk:setBytes("") end
end

-- Runs after the transcoder on the way out (encoder filters run in reverse order).
function envoy_on_response(response_handle)
  local md = response_handle:streamInfo():dynamicMetadata():get("oai")
  if md ~= nil and md["native_grpc"] == "1" then return end
  local head = md ~= nil and md["head"] == "1"
  local h = response_handle:headers()
  local err = h:get("x-oai-error")
  local status = h:get("x-oai-status")
  if md ~= nil and md["rest_status"] ~= nil then status, err = md["rest_status"], md["rest_body"] end
  local grpc_status = h:get("grpc-status")
  if err == nil and grpc_status ~= nil and grpc_status ~= "0" then
    status, err = fallback(h, grpc_status, md ~= nil and md["anthropic"] == "1")
  end
  if err == nil then
    h:remove("grpc-status"); h:remove("grpc-message"); h:remove("grpc-accept-encoding")
    if head then drop_body(response_handle) end
    return
  end
  h:replace(":status", status or "500")
  h:replace("content-type", "application/json")
  for _, k in ipairs({"x-oai-error", "x-oai-status", "grpc-status", "grpc-message", "grpc-status-details-bin"}) do
    h:remove(k)
  end
  if head then
    h:replace("content-length", tostring(#err))
    drop_body(response_handle)
    return
  end
  response_handle:body(true):setBytes(err)
end
