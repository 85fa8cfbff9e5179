set terminal pngcairo size 1000,600 noenhanced font ',10'
set output 'accuracy-det-virtual.png'
set title 'Fashion-MNIST detection set, 16 ranks, virtual time, 10gbit links, 50 us latency'
set xlabel 'training time (s)'
set ylabel 'held-out mAP@0.5'
set key outside right
set grid
plot 'acc-det-virtual-bsp.dat' using 2:3 with linespoints title 'BSP', 'acc-det-virtual-selsync-0.3.dat' using 2:3 with linespoints title 'SelSync δ=0.3'
