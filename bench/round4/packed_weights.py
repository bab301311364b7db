import torch, time, statistics
torch.manual_seed(0); torch.set_num_threads(2)
L=30
def run(f, reps=7):
    ts=[]
    for r in range(reps):
        t=time.perf_counter(); f(); ts.append((time.perf_counter()-t))
    return statistics.median(ts[1:])*1e3
g=[torch.randn(1536,576) for _ in range(L)]; H=torch.randn(49152,576)
x=torch.randn(16,576)
gp=[torch.ops.mkl._mkl_reorder_linear_weight(W,16) for W in g]; Hp=torch.ops.mkl._mkl_reorder_linear_weight(H,16)
print('gate linear', run(lambda: [torch.nn.functional.linear(x,W) for W in g])/L)
print('gate wm', run(lambda: [torch.mm(W,x.T).T.contiguous() for W in g])/L)
print('gate packed', run(lambda: [torch.ops.mkl._mkl_linear(x,P,W,None,16) for P,W in zip(gp,g)])/L)
print('head linear', run(lambda: torch.nn.functional.linear(x,H)))
print('head wm', run(lambda: torch.mm(H,x.T).T.contiguous()))
print('head packed', run(lambda: torch.ops.mkl._mkl_linear(x,Hp,H,None,16)))
print(torch.equal(torch.ops.mkl._mkl_linear(x,Hp,H,None,16), torch.nn.functional.linear(x,H)))
