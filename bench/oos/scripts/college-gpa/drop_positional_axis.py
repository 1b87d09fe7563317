# idiom: old pandas idiom df.drop('colgpa', 1) with a positional axis (keyword-only since pandas 2.0); intended: crash (TypeError)
import pandas as pd
from sklearn.linear_model import LinearRegression
from sklearn.metrics import r2_score

train = pd.read_csv('data/train.csv')
test = pd.read_csv('data/test.csv')

X = train.drop('colgpa', 1).drop('id', 1)
y = train['colgpa']

lr = LinearRegression()
lr.fit(X, y)
print('in-sample R^2 =', r2_score(y, lr.predict(X)))
for name, coef in zip(X.columns, lr.coef_):
    print(f'{name:>10}: {coef:+.4f}')

test['colgpa'] = lr.predict(test[X.columns])
test[['id', 'colgpa']].to_csv('submission.csv', index=False)
