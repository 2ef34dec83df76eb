package main

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/axgate/axgate"
	axerr "github.com/axgate/axgate/errors"
	"github.com/axgate/axgate/middleware"
)

// The shop's people. IDs are UUIDs because account.delete takes an
// account_id of format uuid, and under scope: user it must be the caller's.
var people = []person{
	{Name: "alice", ID: "11111111-1111-4111-8111-111111111111", Tenant: "acme", Roles: []string{"customer"}},
	{Name: "bob", ID: "22222222-2222-4222-8222-222222222222", Tenant: "acme", Roles: []string{"finance_manager"}},
	{Name: "carol", ID: "33333333-3333-4333-8333-333333333333", Tenant: "acme", Roles: []string{"finance_director"}},
	{Name: "dave", ID: "44444444-4444-4444-8444-444444444444", Tenant: "acme", Roles: []string{"admin"}},
	{Name: "erin", ID: "55555555-5555-4555-8555-555555555555", Tenant: "globex", Roles: []string{"customer"}},
}

type person struct {
	Name   string
	ID     string
	Tenant string
	Roles  []string
}

type product struct {
	ID       string  `json:"id"`
	Name     string  `json:"name"`
	Category string  `json:"category"`
	Price    float64 `json:"price"`
}

var catalogue = []product{
	{"9b2f1c1e-8a4f-4c55-9d6e-3f2a1b0c9d8e", "Desk lamp", "home", 39.90},
	{"5d1e7a2b-3c4d-4e5f-8a9b-0c1d2e3f4a5b", "Floor lamp", "home", 89.00},
	{"0f1e2d3c-4b5a-4968-8776-a5b4c3d2e1f0", "Lamp oil, 1 l", "home", 7.50},
	{"7c6b5a49-3827-4165-9e8d-7c6b5a493827", "The Go Programming Language", "books", 44.00},
	{"1a2b3c4d-5e6f-4a7b-8c9d-0e1f2a3b4c5d", "USB-C cable", "electronics", 9.99},
}

// lampID is the product the walkthrough puts in the cart.
// The shop's own refusal reasons (details.reason), besides axgate's.
const (
	reasonUnknownProduct axerr.Reason = "unknown_product"
	reasonUnknownCoupon  axerr.Reason = "unknown_coupon"
	reasonUnknownOrder   axerr.Reason = "unknown_order"
	reasonOverRefund     axerr.Reason = "over_refund"
)

const lampID = "9b2f1c1e-8a4f-4c55-9d6e-3f2a1b0c9d8e"

type order struct {
	ID      string         `json:"order_id"`
	Owner   string         `json:"-"`
	Tenant  string         `json:"-"`
	Items   map[string]int `json:"items"`
	Total   float64        `json:"total"`
	Status  string         `json:"status"`
	Notes   string         `json:"notes,omitempty"`
	Window  []int          `json:"delivery_window,omitempty"`
	Refunds []float64      `json:"refunds,omitempty"`
}

// snapshot copies the order for a result, which is encoded after the
// store's lock is released.
func (o *order) snapshot() *order {
	c := *o
	c.Items = maps.Clone(o.Items)
	c.Window = slices.Clone(o.Window)
	c.Refunds = slices.Clone(o.Refunds)
	return &c
}

type invoice struct {
	ID     string  `json:"invoice_id"`
	Tenant string  `json:"tenant_id"`
	Amount float64 `json:"amount"`
	Status string  `json:"status"`
}

// store is the shop's state, in memory.
type store struct {
	mu        sync.Mutex
	carts     map[string]map[string]int // cart id → product id → quantity
	cartOwner map[string]string         // cart id → person id
	addresses map[string]string         // address id → person id
	payment   map[string]bool           // person id → has a payment method
	subs      map[string]int            // person id → active subscriptions
	orders    map[string]*order
	invoices  []invoice
	outbox    map[string]string // order id → e-mail sent to
	deleted   map[string]time.Time
	coupons   map[string]string // person id → applied code
	seq       int
}

func newStore() *store {
	s := &store{
		carts: map[string]map[string]int{}, cartOwner: map[string]string{},
		addresses: map[string]string{}, payment: map[string]bool{}, subs: map[string]int{},
		orders: map[string]*order{}, outbox: map[string]string{}, deleted: map[string]time.Time{},
		coupons: map[string]string{},
		invoices: []invoice{
			{"inv-1001", "acme", 1200, "paid"}, {"inv-1002", "acme", 640, "open"},
			{"inv-2001", "globex", 99, "open"},
		},
	}
	for _, p := range people {
		c := cartID(p.ID)
		s.carts[c] = map[string]int{}
		s.cartOwner[c] = p.ID
		s.addresses["addr-"+p.Name] = p.ID
		s.payment[p.ID] = true
	}
	s.subs[people[1].ID] = 1 // bob still has a subscription
	return s
}

// cartID is a person's cart: one each, derived from the person's ID.
func cartID(personID string) string { return "c" + personID[1:] }

// tools are the shop's tool handlers, by tool name.
func (s *store) tools() map[string]middleware.Invoker {
	return map[string]middleware.Invoker{
		"product_search":    tool(s.searchProducts),
		"cart_add_item":     tool(s.addToCart),
		"order_place":       tool(s.placeOrder),
		"account_delete":    tool(s.deleteAccount),
		"user_list":         tool(s.listUsers),
		"invoice_list":      tool(s.listInvoices),
		"coupon_apply":      tool(s.applyCoupon),
		"delivery_schedule": tool(s.scheduleDelivery),
		"refund_process":    tool(s.processRefund),
	}
}

// tool adapts a function of the caller and the (already validated)
// arguments to a middleware.Invoker.
func tool(f func(p middleware.Principal, args map[string]any) (any, error)) middleware.Invoker {
	return middleware.InvokerFunc(func(_ context.Context, call *middleware.Call) (middleware.Result, error) {
		args, err := call.Args()
		if err != nil {
			return middleware.Result{}, err
		}
		v, err := f(call.Principal, args)
		return middleware.Result{Value: v}, err
	})
}

func str(args map[string]any, k string) string { s, _ := args[k].(string); return s }

func num(args map[string]any, k string, def float64) float64 {
	if f, ok := args[k].(float64); ok {
		return f
	}
	return def
}

func (s *store) searchProducts(_ middleware.Principal, args map[string]any) (any, error) {
	q := strings.ToLower(str(args, "query"))
	cat := str(args, "category")
	page, limit := int(num(args, "page", 1)), int(num(args, "limit", 20))
	var hits []product
	for _, p := range catalogue {
		if strings.Contains(strings.ToLower(p.Name), q) && (cat == "" || p.Category == cat) {
			hits = append(hits, p)
		}
	}
	total := len(hits)
	from := min((page-1)*limit, total)
	to := min(from+limit, total)
	return map[string]any{"products": hits[from:to], "total": total, "page": page}, nil
}

func (s *store) addToCart(p middleware.Principal, args map[string]any) (any, error) {
	pid := str(args, "product_id")
	if !slices.ContainsFunc(catalogue, func(x product) bool { return x.ID == pid }) {
		return nil, axerr.Newf(axerr.CodePreconditionFailed, "there is no product %s", pid).
			WithReason(reasonUnknownProduct).WithSuggestion("Find the product with product_search first.")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	c := cartID(p.ID)
	if s.carts[c] == nil {
		s.carts[c] = map[string]int{}
		s.cartOwner[c] = p.ID
	}
	s.carts[c][pid] = min(s.carts[c][pid]+int(num(args, "quantity", 1)), 99)
	// A copy: the result is encoded after the lock is released.
	return map[string]any{"cart_id": c, "items": maps.Clone(s.carts[c])}, nil
}

func (s *store) placeOrder(p middleware.Principal, args map[string]any) (any, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := str(args, "cart_id")
	s.seq++
	o := &order{ID: fmt.Sprintf("ord-%04d", s.seq), Owner: p.ID, Tenant: p.Tenant, Items: s.carts[c], Status: "pending", Notes: str(args, "notes")}
	for pid, n := range o.Items {
		for _, x := range catalogue {
			if x.ID == pid {
				o.Total += x.Price * float64(n)
			}
		}
	}
	s.orders[o.ID] = o
	s.carts[c] = map[string]int{}
	s.outbox[o.ID] = p.ID
	return o.snapshot(), nil
}

func (s *store) deleteAccount(p middleware.Principal, args map[string]any) (any, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	id := str(args, "account_id")
	s.deleted[id] = time.Now()
	return map[string]any{"account_id": id, "status": "deactivated", "retention_days": 30}, nil
}

func (s *store) listUsers(p middleware.Principal, args map[string]any) (any, error) {
	q, role := strings.ToLower(str(args, "search")), str(args, "role")
	out := []map[string]any{}
	for _, x := range people {
		if x.Tenant != p.Tenant || !strings.Contains(x.Name, q) {
			continue
		}
		if role != "" && !slices.Contains(x.Roles, role) {
			continue
		}
		out = append(out, map[string]any{"id": x.ID, "name": x.Name, "roles": x.Roles})
	}
	return map[string]any{"users": out}, nil
}

func (s *store) listInvoices(_ middleware.Principal, args map[string]any) (any, error) {
	// The tenant gate has already checked that tenant_id is the caller's.
	tenant, status := str(args, "tenant_id"), str(args, "status")
	out := []invoice{}
	for _, inv := range s.invoices {
		if inv.Tenant == tenant && (status == "" || inv.Status == status) {
			out = append(out, inv)
		}
	}
	return map[string]any{"invoices": out}, nil
}

func (s *store) applyCoupon(p middleware.Principal, args map[string]any) (any, error) {
	code := str(args, "code")
	if code != "SAVE10" {
		return nil, axerr.Newf(axerr.CodePreconditionFailed, "coupon %q does not exist", code).WithReason(reasonUnknownCoupon)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.coupons[p.ID] = code
	return map[string]any{"code": code, "discount_percent": 10}, nil
}

func (s *store) scheduleDelivery(p middleware.Principal, args map[string]any) (any, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	o := s.orders[str(args, "order_id")]
	if o == nil || o.Owner != p.ID {
		return nil, axerr.Newf(axerr.CodePreconditionFailed, "you have no order %s", str(args, "order_id")).WithReason(reasonUnknownOrder)
	}
	o.Window = []int{int(num(args, "window_start", 0)), int(num(args, "window_end", 0))}
	return o.snapshot(), nil
}

func (s *store) processRefund(p middleware.Principal, args map[string]any) (any, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	o := s.orders[str(args, "order_id")]
	if o == nil || o.Tenant != p.Tenant {
		return nil, axerr.Newf(axerr.CodePreconditionFailed, "there is no order %s", str(args, "order_id")).WithReason(reasonUnknownOrder)
	}
	amount := num(args, "amount", 0)
	refunded := 0.0
	for _, r := range o.Refunds {
		refunded += r
	}
	if refunded+amount > o.Total+0.005 {
		return nil, axerr.Newf(axerr.CodePreconditionFailed, "a refund of %.2f is more than the %.2f left on the order", amount, o.Total-refunded).WithReason(reasonOverRefund)
	}
	o.Refunds = append(o.Refunds, amount)
	return map[string]any{"order_id": o.ID, "refunded": amount, "status": "refunded"}, nil
}

// conditions binds the manifest's preconditions and postconditions to
// checks of the store. Preconditions only look; the enforcer also runs them
// for Check.
func (s *store) conditions() []axgate.Option {
	pre := func(name string, ok func(p middleware.Principal, args map[string]any) bool, msg string) axgate.Option {
		return axgate.WithPrecondition(name, func(_ context.Context, call *middleware.Call) error {
			args, err := call.Args()
			if err != nil {
				return err
			}
			s.mu.Lock()
			defer s.mu.Unlock()
			if !ok(call.Principal, args) {
				return axgate.PreconditionFailed(call.Intent(), name, msg)
			}
			return nil
		})
	}
	post := func(name string, ok func(res map[string]any, args map[string]any) bool) axgate.Option {
		return axgate.WithPostcondition(name, func(_ context.Context, call *middleware.Call, res middleware.Result) error {
			args, _ := call.Args()
			m := resultMap(res.Value)
			s.mu.Lock()
			defer s.mu.Unlock()
			if !ok(m, args) {
				return errors.New(name + " does not hold")
			}
			return nil
		})
	}
	orderID := func(res map[string]any) string { id, _ := res["order_id"].(string); return id }
	return []axgate.Option{
		pre("cart is not empty", func(p middleware.Principal, a map[string]any) bool {
			c := str(a, "cart_id")
			return s.cartOwner[c] == p.ID && len(s.carts[c]) > 0
		}, "the cart is empty: add an item with cart_add_item first"),
		pre("shipping address is valid", func(p middleware.Principal, a map[string]any) bool {
			return s.addresses[str(a, "shipping_address_id")] == p.ID
		}, "the shipping address is not one of yours (yours is addr-<your name>)"),
		pre("payment method is set", func(p middleware.Principal, _ map[string]any) bool { return s.payment[p.ID] },
			"set a payment method in your account first"),
		pre("no active subscriptions", func(_ middleware.Principal, a map[string]any) bool { return s.subs[str(a, "account_id")] == 0 },
			"cancel the account's subscriptions first"),
		pre("no pending orders", func(_ middleware.Principal, a map[string]any) bool {
			for _, o := range s.orders {
				if o.Owner == str(a, "account_id") && o.Status == "pending" {
					return false
				}
			}
			return true
		}, "wait until the account's pending orders are delivered"),
		post("order created", func(res, _ map[string]any) bool { return s.orders[orderID(res)] != nil }),
		post("cart cleared", func(_, a map[string]any) bool { return len(s.carts[str(a, "cart_id")]) == 0 }),
		post("confirmation email sent", func(res, _ map[string]any) bool { return s.outbox[orderID(res)] != "" }),
		post("account deactivated", func(_, a map[string]any) bool { return !s.deleted[str(a, "account_id")].IsZero() }),
		post("data retention period started", func(res, _ map[string]any) bool { return res["retention_days"] != nil }),
	}
}

// resultMap views a tool result as a JSON object.
func resultMap(v any) map[string]any {
	switch t := v.(type) {
	case map[string]any:
		return t
	case *order:
		return map[string]any{"order_id": t.ID}
	}
	return nil
}
