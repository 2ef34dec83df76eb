# The decisions of testdata/docs.json in Rego (OPA v1 syntax): roles, tenant,
# the parameter model (required, unknown members, types, lengths, enum,
# ranges, array size), the constraint and the confirmation token
# (io.jwt.decode_verify, EdDSA). The arguments' JCS digest is computed by the
# host (Rego has no JCS) and passed as input.args_sha256.
package axgate

roles := {
	"doc.read": {"reader", "editor"},
	"doc.update": {"editor"},
	"doc.delete": {"editor"},
}

params := {
	"doc.read": {
		"required": ["doc_id", "tenant_id"],
		"props": {
			"doc_id": {"type": "string", "maxLength": 64},
			"tenant_id": {"type": "string", "maxLength": 64},
			"format": {"type": "string", "enum": {"json", "text", "html"}},
			"limit": {"type": "integer", "min": 1, "max": 100},
			"fields": {"type": "array", "maxItems": 1000},
		},
	},
	"doc.update": {
		"required": ["doc_id", "tenant_id", "from_page", "to_page"],
		"props": {
			"doc_id": {"type": "string", "maxLength": 64},
			"tenant_id": {"type": "string", "maxLength": 64},
			"from_page": {"type": "integer", "min": 1, "max": 10000},
			"to_page": {"type": "integer", "min": 1, "max": 10000},
			"title": {"type": "string", "maxLength": 200},
		},
	},
	"doc.delete": {
		"required": ["doc_id", "tenant_id"],
		"props": {
			"doc_id": {"type": "string", "maxLength": 64},
			"tenant_id": {"type": "string", "maxLength": 64},
		},
	},
}

authorized if {
	some role in input.principal.roles
	role in roles[input.intent]
	input.args.tenant_id == input.principal.tenant
}

violations contains {"path": concat("/", ["", name]), "keyword": "required"} if {
	some name in params[input.intent].required
	not name in object.keys(input.args)
}

violations contains {"path": concat("/", ["", name]), "keyword": "additionalProperties"} if {
	some name, _ in input.args
	not params[input.intent].props[name]
}

violations contains {"path": concat("/", ["", name]), "keyword": "type"} if {
	some name, v in input.args
	p := params[input.intent].props[name]
	not type_ok(p.type, v)
}

violations contains {"path": concat("/", ["", name]), "keyword": "maxLength"} if {
	some name, v in input.args
	p := params[input.intent].props[name]
	is_string(v)
	count(v) > p.maxLength
}

violations contains {"path": concat("/", ["", name]), "keyword": "enum"} if {
	some name, v in input.args
	p := params[input.intent].props[name]
	p.enum
	not v in p.enum
}

violations contains {"path": concat("/", ["", name]), "keyword": "minimum"} if {
	some name, v in input.args
	p := params[input.intent].props[name]
	is_number(v)
	v < p.min
}

violations contains {"path": concat("/", ["", name]), "keyword": "maximum"} if {
	some name, v in input.args
	p := params[input.intent].props[name]
	is_number(v)
	v > p.max
}

violations contains {"path": concat("/", ["", name]), "keyword": "maxItems"} if {
	some name, v in input.args
	p := params[input.intent].props[name]
	is_array(v)
	count(v) > p.maxItems
}

type_ok("string", v) if is_string(v)

type_ok("integer", v) if {
	is_number(v)
	v == round(v)
}

type_ok("array", v) if is_array(v)

constraints_ok if input.intent != "doc.update"

constraints_ok if {
	input.intent == "doc.update"
	input.args.to_page >= input.args.from_page
}

confirmed if input.intent != "doc.delete"

confirmed if {
	input.intent == "doc.delete"
	[valid, header, claims] := io.jwt.decode_verify(input.token, {"cert": data.jwks, "iss": "axgate", "aud": "axgate"})
	valid
	header.typ == "axag-confirmation+jwt"
	claims.jti != ""
	claims.iat
	claims.intent == input.intent
	claims.sub == input.principal.id
	claims.tenant == input.principal.tenant
	claims.args_sha256 == input.args_sha256
}

default allow := false

allow if {
	authorized
	count(violations) == 0
	constraints_ok
	confirmed
}

decision := {"allow": allow, "violations": violations}
