package main

import (
	"context"
	"fmt"
	"strings"
	"sync"

	"github.com/axgate/axgate"
	"github.com/axgate/axgate/adapters/mcpgate"
	"github.com/axgate/axgate/middleware"
)

// shop is a toy shop kept in memory. Its handlers run only for calls axgate
// allowed, so they trust their arguments: types, ranges, formats and
// confirmation were checked before.
type shop struct {
	mu     sync.Mutex
	carts  map[string][]map[string]any // by principal id
	orders int
}

func newShop() *shop { return &shop{carts: map[string][]map[string]any{}} }

var catalogue = []map[string]any{
	{"id": "7b0e4f1c-3a52-4c1e-9d8a-5f2b6c7d8e90", "name": "Desk lamp", "category": "home", "price": 39.0},
	{"id": "2c9d8e7f-6a5b-4c3d-8e1f-0a9b8c7d6e5f", "name": "Reading lamp", "category": "home", "price": 24.5},
	{"id": "9f8e7d6c-5b4a-4f3e-8d2c-1b0a9f8e7d6c", "name": "Go in Practice", "category": "books", "price": 42.0},
	{"id": "4a3b2c1d-0e9f-4a8b-9c7d-6e5f4a3b2c1d", "name": "USB-C cable", "category": "electronics", "price": 9.9},
}

// handlers binds every tool of the manifest: the shop's own, and a generic
// one that records the call for any tool the shop does not model.
func (s *shop) handlers(enf *axgate.Enforcer) mcpgate.Handlers {
	own := map[string]middleware.InvokerFunc{
		"product_search": s.search,
		"cart_add_item":  s.addItem,
		"order_place":    s.placeOrder,
		"account_delete": s.deleteAccount,
		"user_list":      s.listUsers,
	}
	h := mcpgate.Handlers{}
	for _, t := range enf.Tools() {
		if f, ok := own[t.Name]; ok {
			h[t.Name] = f
		} else {
			h[t.Name] = middleware.InvokerFunc(done)
		}
	}
	return h
}

func (s *shop) search(_ context.Context, call *middleware.Call) (middleware.Result, error) {
	args, err := call.Args()
	if err != nil {
		return middleware.Result{}, err
	}
	q, _ := args["query"].(string)
	cat, _ := args["category"].(string)
	var hits []map[string]any
	for _, p := range catalogue {
		if strings.Contains(strings.ToLower(p["name"].(string)), strings.ToLower(q)) && (cat == "" || p["category"] == cat) {
			hits = append(hits, p)
		}
	}
	return middleware.Result{Value: map[string]any{"query": q, "results": hits, "count": len(hits)}}, nil
}

func (s *shop) addItem(_ context.Context, call *middleware.Call) (middleware.Result, error) {
	args, err := call.Args()
	if err != nil {
		return middleware.Result{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.carts[call.Principal.ID] = append(s.carts[call.Principal.ID], map[string]any{"product_id": args["product_id"], "quantity": args["quantity"]})
	return middleware.Result{Value: map[string]any{"items": len(s.carts[call.Principal.ID])}}, nil
}

func (s *shop) placeOrder(_ context.Context, call *middleware.Call) (middleware.Result, error) {
	args, err := call.Args()
	if err != nil {
		return middleware.Result{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.orders++
	delete(s.carts, call.Principal.ID)
	return middleware.Result{Value: map[string]any{
		"order_id": fmt.Sprintf("ord-%04d", s.orders), "cart_id": args["cart_id"], "status": "placed",
		"confirmed_inline": call.Facts.ConfirmationElicited,
	}}, nil
}

func (s *shop) deleteAccount(_ context.Context, call *middleware.Call) (middleware.Result, error) {
	args, err := call.Args()
	if err != nil {
		return middleware.Result{}, err
	}
	return middleware.Result{Value: map[string]any{"account_id": args["account_id"], "status": "deletion_scheduled"}}, nil
}

func (s *shop) listUsers(_ context.Context, call *middleware.Call) (middleware.Result, error) {
	return middleware.Result{Value: map[string]any{
		"tenant": call.Principal.Tenant,
		"users":  []map[string]any{{"id": devAgent.ID, "role": "member"}, {"id": devApprover.ID, "role": "admin"}},
	}}, nil
}

// done answers any tool the toy shop does not model.
func done(_ context.Context, call *middleware.Call) (middleware.Result, error) {
	args, err := call.Args()
	if err != nil {
		return middleware.Result{}, err
	}
	return middleware.Result{Value: map[string]any{"tool": call.Tool, "status": "done", "arguments": args}}, nil
}
